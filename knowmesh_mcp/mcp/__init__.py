"""The MCP adapter: the server (`server`), one module per tool (`tools/`), the stdio transport, and the
checks in front of streamable HTTP. Handlers call the service layer and never touch SQL.
"""
