"""The wire shapes: one pydantic model per request (`requests`) and per result (`results`, which
names every result model; each family lives in `result_parts`, `search_results`, `article_results`,
`write_results` or `http_results`). The MCP tools' schemas, the OpenAPI document and the HTTP
edge's parsing derive from them.
"""
