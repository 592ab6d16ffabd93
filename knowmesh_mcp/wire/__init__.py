"""The wire shapes: one pydantic model per request (`requests`) and per result (`results`). The MCP
tools' schemas, the OpenAPI document and the HTTP edge's parsing derive from them.
"""
