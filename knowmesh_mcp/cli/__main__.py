"""`python -m knowmesh_mcp.cli`: the `knowmesh-mcp` command."""

import sys

from knowmesh_mcp.cli.main import main

sys.exit(main())
