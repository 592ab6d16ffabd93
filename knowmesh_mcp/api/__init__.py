"""The HTTP adapter: the Starlette app that hosts `/v1`, the MCP endpoint and the pages (`app`), the
`/v1` route table of handlers (`routes`, built with `table`, reaching `state` and reading and
answering through `http_io`), bearer-token auth, the cross-site guard and the OpenAPI document
(`openapi`, built from the `operations` table).
"""
