"""The `knowmesh-mcp` command: its parser and commands (`main`)."""
