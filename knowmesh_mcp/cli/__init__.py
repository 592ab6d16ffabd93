"""The `knowmesh-mcp` command: `main` (dispatch and exit codes), `parser` (the argparse tree), one
module per command or group of commands (`serve`, `search`, `data`, `tokens`, `maintain`), and
what they share (`mesh`: the database a command opens; `output`: tables and progress bars)."""
