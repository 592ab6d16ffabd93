"""The argparse tree of `knowmesh-mcp`: one function per command or group of commands, called in
the order `--help` lists them."""

from __future__ import annotations

import argparse
from typing import Any, TypeAlias


class HelpWithDefaults(argparse.HelpFormatter):
    """`--help` names each option's default. Flags (off unless given) and options with no default
    get nothing; options whose default is computed say it in their own help text."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, [], argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """The parser of the command and (as argparse makes subcommands of the parent's class) of
    every subcommand, so each `--help` shows its defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpWithDefaults)
        super().__init__(*args, **kwargs)


Commands: TypeAlias = "argparse._SubParsersAction[Parser]"
"""The subcommands of a parser (argparse's class is generic only to type checkers, hence the string)."""


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("knowmesh-mcp")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def tool_list(text: str) -> tuple[str, ...]:
    """--tools a,b,c: the names, in order, once each (checked against the server's tools when serving)."""
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise argparse.ArgumentTypeError("name at least one tool, e.g. --tools search,read_article")
    return names


def outer(nested: bool, default: object) -> object:
    """An option's default: none of its own on an action's parser (`nested`), so that it never
    undoes the value the command's parser took before the action."""
    return argparse.SUPPRESS if nested else default


def database_options(*, nested: bool = False) -> Parser:
    """--db and --empty, as a parent of every subcommand that opens a database.

    A command with actions (`token add`, `admin promote`) takes them both before its action and
    after the action's own arguments: the action's parser has them too, with no default of its own
    (SUPPRESS), so `token --db team.db add alice` is not undone by the action's default."""
    options = Parser(add_help=False)
    options.add_argument(
        "--db",
        default=outer(nested, None),
        help="database file, or postgresql://... for a team's mesh "
        "(default: $KNOWMESH_DB or ~/.local/share/knowmesh/knowmesh.db)",
    )
    options.add_argument(
        "--empty",
        action="store_true",
        default=outer(nested, False),
        help="do not load the starter corpus into a new database",
    )
    return options


def build_parser() -> Parser:
    parser = Parser(
        prog="knowmesh-mcp",
        description="A shared knowledge base of failure patterns for coding agents (MCP server, HTTP service, CLI). "
        "Without a command: serve MCP over stdio, for an MCP client to start.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = database_options()
    add_serve(commands, common)
    add_search_and_read(commands, common)
    add_import_and_export(commands, common)
    add_sync_and_copy(commands, common)
    add_token(commands, common)
    add_doctor(commands, common)
    add_admin(commands, common)
    return parser


def add_serve(commands: Commands, common: Parser) -> None:
    serve = commands.add_parser("serve", parents=[common], help="serve MCP over stdio, or MCP + HTTP API")
    mode = serve.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="MCP over stdin/stdout (the default)")
    mode.add_argument("--http", action="store_true", help="HTTP API and MCP streamable HTTP at /mcp")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP only: the address to listen on")
    serve.add_argument(
        "--auth",
        choices=("required", "optional", "off"),
        help="HTTP only: writes need an agent token (required), may carry one (optional), or take "
        "ids as claimed (off) (default: off on a loopback --host, required on any other)",
    )
    serve.add_argument("--port", type=int, default=8765, help="HTTP only: the port to listen on")
    serve.add_argument("--read-only", action="store_true", help="expose read tools and routes only")
    serve.add_argument(
        "--tools",
        metavar="NAME,...",
        type=tool_list,
        help="serve only these MCP tools, e.g. search,read_article,report_outcome (default: all; "
        "the /v1 API is unchanged)",
    )
    serve.add_argument(
        "--remote",
        metavar="URL",
        help="stdio only: answer every tool through this mesh's HTTP API (default: $KNOWMESH_URL)",
    )
    serve.add_argument(
        "--write-limit", type=int, default=10, help="HTTP only: submissions per hour per agent or IP (0 disables)"
    )
    serve.add_argument(
        "--trust-proxy",
        metavar="ADDR",
        help="believe X-Forwarded-For only from these proxy addresses (comma-separated; default: none)",
    )
    serve.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let pages of this origin call the API from a browser (repeatable; default: none)",
    )


def add_search_and_read(commands: Commands, common: Parser) -> None:
    search = commands.add_parser("search", parents=[common], help="search with a raw error or a description")
    search.add_argument("query", help="the raw error (quote it) or a description; - reads it from stdin")
    search.add_argument("--env", help="e.g. macos-15,python-3.12,pip")
    search.add_argument("--ecosystem", help="python, node, go, ... (ranks, never filters)")
    search.add_argument("--limit", type=int, default=5, help="results wanted (at most 20)")
    search.add_argument("--json", action="store_true", help="print the JSON envelope instead of a table")

    read = commands.add_parser("read", parents=[common], help="print one article")
    read.add_argument("id", help="node id, {ecosystem}/{slug}")
    read.add_argument("--env", help="e.g. macos-15,python-3.12,pip: only the answer for this environment")
    read.add_argument(
        "--include",
        metavar="WHAT",
        help="also show, comma-separated: alternatives, archived_failures (failed attempts an answer "
        "has made obsolete)",
    )
    read.add_argument("--json", action="store_true", help="print the JSON read instead of Markdown")


def add_import_and_export(commands: Commands, common: Parser) -> None:
    importer = commands.add_parser(
        "import", parents=[common], help="import node documents (JSON, JSON array, JSONL; folders recursively)"
    )
    importer.add_argument("paths", nargs="+", metavar="PATH")
    importer.add_argument("--dry-run", action="store_true", help="validate and report, write nothing")
    importer.add_argument(
        "-v", "--verbose", action="store_true", help="list every problem of an invalid document, not only the first"
    )

    export = commands.add_parser("export", parents=[common], help="write every current document as JSONL")
    export.add_argument("-o", "--output", help="file to write (default: stdout)")


def add_sync_and_copy(commands: Commands, common: Parser) -> None:
    sync = commands.add_parser("sync", parents=[common], help="pull a remote mesh's changes into the local store")
    sync.add_argument(
        "--from", dest="source", required=True, metavar="URL", help="the remote mesh, e.g. http://team:8765"
    )
    sync.add_argument("--token", help="bearer token for the remote (default: $KNOWMESH_TOKEN)")
    sync.add_argument("--json", action="store_true", help="print the sync report as JSON")

    copying = commands.add_parser(
        "copy", help="copy a whole mesh to another database (SQLite file <-> postgresql://...)"
    )
    copying.add_argument(
        "--from", dest="source", required=True, metavar="PATH_OR_URL", help="the mesh to copy (only read)"
    )
    copying.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="PATH_OR_URL",
        help="an empty database (a new file is made), or the target of an earlier copy of this mesh",
    )
    copying.add_argument("--json", action="store_true", help="print the copy report as JSON")


def add_token(commands: Commands, common: Parser) -> None:
    nested = [database_options(nested=True)]
    tokens = commands.add_parser("token", parents=[common], help="agent tokens of this mesh (add, list, revoke)")
    token_commands = tokens.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    token_add = token_commands.add_parser(
        "add", parents=nested, help="make a token bound to AGENT_ID and print it (once)"
    )
    token_add.add_argument("agent_id", metavar="AGENT_ID")
    token_add.add_argument(
        "--role",
        choices=("agent", "maintainer"),
        default="agent",
        help="maintainers may also promote, deprecate, merge and close issues",
    )
    token_list = token_commands.add_parser("list", parents=nested, help="agents with tokens: role, created, last used")
    token_list.add_argument("--json", action="store_true", help="print the list as JSON")
    token_revoke = token_commands.add_parser(
        "revoke", parents=nested, help="revoke every live token of AGENT_ID (with --id, one)"
    )
    token_revoke.add_argument("agent_id", metavar="AGENT_ID")
    token_revoke.add_argument("--id", dest="token_id", metavar="ID", help="only this token (its ID in `token list`)")


def add_doctor(commands: Commands, common: Parser) -> None:
    doctor = commands.add_parser(
        "doctor", parents=[common], help="check the database and say what a user needs to know"
    )
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")


def add_admin(commands: Commands, common: Parser) -> None:
    admin = commands.add_parser(
        "admin",
        parents=[common, admin_options()],
        help="maintainer actions, on the local database (or --remote URL with a maintainer token)",
    )
    actions = admin.add_subparsers(dest="admin_command", metavar="ACTION", required=True)
    nested = [database_options(nested=True), admin_options(nested=True)]
    add_status_actions(actions, nested)
    merge = actions.add_parser(
        "merge", parents=nested, help="confirm a flagged dedupe pair as one node (the other answers 301)"
    )
    merge.add_argument("task_id", metavar="TASK_ID")
    merge.add_argument("--canonical", help="the node to keep (default: the one the votes agreed on)")
    merge.add_argument("--note", help="why, for the audit log")
    add_issue_actions(actions, nested)
    actions.add_parser("flagged", parents=nested, help="list dedupe pairs flagged for a merge")
    audit = actions.add_parser("audit", parents=nested, help="print the audit log of maintainer actions")
    audit.add_argument("--target", help="only this node id or issue number")


def admin_options(*, nested: bool = False) -> Parser:
    """--remote, --token and --json of `admin`, taken before its action and after the action's own
    arguments, as `database_options` are (nested: no default of their own)."""
    options = Parser(add_help=False)
    options.add_argument(
        "--remote",
        metavar="URL",
        default=outer(nested, None),
        help="act on this mesh's HTTP API (token: --token or $KNOWMESH_TOKEN)",
    )
    options.add_argument(
        "--token",
        default=outer(nested, None),
        help="a maintainer's token for --remote (default: $KNOWMESH_TOKEN)",
    )
    options.add_argument(
        "--json",
        action="store_true",
        default=outer(nested, False),
        help="print the result as JSON",
    )
    return options


def add_status_actions(actions: Commands, nested: list[Parser]) -> None:
    """`admin promote|draft|deprecate NODE_ID`: one action each, with the status it sets."""
    for name, status, what in (
        ("promote", "verified", "promote a node to verified"),
        ("draft", "draft", "set a node back to draft"),
        ("deprecate", "deprecated", "deprecate a node: it leaves lists and search, stays readable"),
    ):
        action = actions.add_parser(name, parents=nested, help=what)
        action.add_argument("id", metavar="NODE_ID")
        action.add_argument("--note", help="why, for the audit log")
        action.set_defaults(status=status)


def add_issue_actions(actions: Commands, nested: list[Parser]) -> None:
    """`admin close-issue|discard-issue NUMBER --note ...`: one action each, with the status it sets."""
    for name, status, what in (
        ("close-issue", "closed", "close a service issue as fixed"),
        ("discard-issue", "discarded", "discard a service issue as not accepted"),
    ):
        action = actions.add_parser(name, parents=nested, help=what)
        action.add_argument("number", metavar="NUMBER")
        action.add_argument("--note", required=True, help="what was done, for the people who filed it")
        action.set_defaults(status=status)
