"""The HTTP adapter: the Starlette app that hosts `/v1`, the MCP endpoint and the pages (`app`), the
`/v1` route table (`routes`), bearer-token auth, the cross-site guard and the OpenAPI document.
"""
