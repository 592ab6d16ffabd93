"""The `knowmesh-mcp` command: `main(argv)` parses, runs the command's module, and turns errors
into exit codes.

Commands that do not serve MCP never import the `mcp` package (it costs ~0.7 s), and a
stdio server writes nothing but protocol messages to stdout. Exit codes: 0 ok, 1 runtime
error, 2 bad usage or bad input, with one clear line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from contextlib import suppress
from typing import Any

from knowmesh_mcp.cli.data import run_copy, run_export, run_import, run_sync
from knowmesh_mcp.cli.maintain import run_admin, run_doctor
from knowmesh_mcp.cli.parser import build_parser
from knowmesh_mcp.cli.search import run_read, run_search
from knowmesh_mcp.cli.serve import run_serve
from knowmesh_mcp.cli.tokens import run_token
from knowmesh_mcp.cli.usage import UsageError
from knowmesh_mcp.core.errors import DatabaseUnusable, KnowmeshError

Command = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]

COMMANDS: dict[str, Command] = {
    "search": run_search,
    "read": run_read,
    "import": run_import,
    "export": run_export,
    "sync": run_sync,
    "token": run_token,
    "admin": run_admin,
    "doctor": run_doctor,
    "copy": run_copy,
}
"""Every command but `serve`, which runs its own event loop (uvicorn's, for --http)."""


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        argv = ["serve", "--stdio"]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return run(args)
    except UsageError as error:
        print(f"knowmesh-mcp: {error}", file=sys.stderr)
        return 2
    except DatabaseUnusable as error:  # the message names the path and what is wrong
        print(f"knowmesh-mcp: {error.message}", file=sys.stderr)
        return 2 if error.status < 500 else 1
    except KnowmeshError as error:
        print(f"knowmesh-mcp: {error.code}: {error.message}", file=sys.stderr)
        return 2 if error.status < 500 else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return reader_went_away()
    except Exception as error:  # one clear line, not a traceback
        print(f"knowmesh-mcp: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


def run(args: argparse.Namespace) -> int:
    """The parsed command, run to its exit code; its errors are `main`'s to report."""
    if args.command == "serve":
        return run_serve(args)
    code = asyncio.run(COMMANDS[args.command](args))
    sys.stdout.flush()  # output still buffered meets a closed pipe here, not as "Exception ignored" at exit
    return code


def reader_went_away() -> int:
    """stdout's reader closed it early (`knowmesh-mcp export | head`): end quietly, as a program
    killed by SIGPIPE would, with 141 (128 + 13). stdout now writes to the null device, so the
    flush at exit cannot fail a second time with "Exception ignored ... BrokenPipeError"."""
    with suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    return 141


if __name__ == "__main__":
    sys.exit(main())
