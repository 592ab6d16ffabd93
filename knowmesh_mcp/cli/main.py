"""The `knowmesh-mcp` command.

Commands that do not serve MCP never import the `mcp` package (it costs ~0.7 s), and a
stdio server writes nothing but protocol messages to stdout. Exit codes: 0 ok, 1 runtime
error, 2 bad usage or bad input, with one clear line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from knowmesh_mcp.core.errors import DatabaseUnusable, KnowmeshError


def default_db_path() -> str:
    """--db, else KNOWMESH_DB, else $XDG_DATA_HOME/knowmesh/knowmesh.db."""
    if os.environ.get("KNOWMESH_DB"):
        return os.environ["KNOWMESH_DB"]
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(data_home) / "knowmesh" / "knowmesh.db")


def database_path(args: argparse.Namespace) -> str:
    """The database this command uses. An explicit one (--db, KNOWMESH_DB) must be in an existing
    folder, which `Store.open` checks; the default location's folder is created on first use."""
    if args.db:
        return args.db
    path = default_db_path()
    if not os.environ.get("KNOWMESH_DB"):
        folder = Path(path).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(
                f"cannot create {path}: folder {folder} cannot be made ({error.strerror or error})"
            ) from None
    return path


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


class UsageError(Exception):
    """Bad input detected by the command itself: exit 2."""


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


def database_options(*, nested: bool = False) -> argparse.ArgumentParser:
    """--db and --empty, as a parent of every subcommand that opens a database.

    A command with actions (`token add`, `admin promote`) takes them both before its action and
    after the action's own arguments: the action's parser has them too, with no default of its own
    (SUPPRESS), so `token --db team.db add alice` is not undone by the action's default."""
    options = argparse.ArgumentParser(add_help=False)
    unset = {"default": argparse.SUPPRESS} if nested else {}
    options.add_argument(
        "--db",
        help="database file, or postgresql://... for a team's mesh "
        "(default: $KNOWMESH_DB or ~/.local/share/knowmesh/knowmesh.db)",
        **unset,
    )
    options.add_argument(
        "--empty", action="store_true", help="do not load the starter corpus into a new database", **unset
    )
    return options


def build_parser() -> argparse.ArgumentParser:
    common, nested = database_options(), [database_options(nested=True)]

    parser = Parser(
        prog="knowmesh-mcp",
        description="A shared knowledge base of failure patterns for coding agents (MCP server, HTTP service, CLI). "
        "Without a command: serve MCP over stdio, for an MCP client to start.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

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

    doctor = commands.add_parser(
        "doctor", parents=[common], help="check the database and say what a user needs to know"
    )
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")

    admin = commands.add_parser(
        "admin",
        parents=[common],
        help="maintainer actions, on the local database (or --remote URL with a maintainer token)",
    )
    admin.add_argument(
        "--remote", metavar="URL", help="act on this mesh's HTTP API (token: --token or $KNOWMESH_TOKEN)"
    )
    admin.add_argument("--token", help="a maintainer's token for --remote (default: $KNOWMESH_TOKEN)")
    admin.add_argument("--json", action="store_true", help="print the result as JSON")
    actions = admin.add_subparsers(dest="admin_command", metavar="ACTION", required=True)
    for name, status, what in (
        ("promote", "verified", "promote a node to verified"),
        ("draft", "draft", "set a node back to draft"),
        ("deprecate", "deprecated", "deprecate a node: it leaves lists and search, stays readable"),
    ):
        action = actions.add_parser(name, parents=nested, help=what)
        action.add_argument("id", metavar="NODE_ID")
        action.add_argument("--note", help="why, for the audit log")
        action.set_defaults(status=status)
    merge = actions.add_parser(
        "merge", parents=nested, help="confirm a flagged dedupe pair as one node (the other answers 301)"
    )
    merge.add_argument("task_id", metavar="TASK_ID")
    merge.add_argument("--canonical", help="the node to keep (default: the one the votes agreed on)")
    merge.add_argument("--note", help="why, for the audit log")
    for name, status, what in (
        ("close-issue", "closed", "close a service issue as fixed"),
        ("discard-issue", "discarded", "discard a service issue as not accepted"),
    ):
        action = actions.add_parser(name, parents=nested, help=what)
        action.add_argument("number", metavar="NUMBER")
        action.add_argument("--note", required=True, help="what was done, for the people who filed it")
        action.set_defaults(status=status)
    actions.add_parser("flagged", parents=nested, help="list dedupe pairs flagged for a merge")
    audit = actions.add_parser("audit", parents=nested, help="print the audit log of maintainer actions")
    audit.add_argument("--target", help="only this node id or issue number")
    return parser


async def _open(args: argparse.Namespace, *, starter: bool = True):  # -> Service, imported lazily: start-up stays light
    """The mesh the command works on. `starter` False (doctor, token) leaves a new mesh's starter
    corpus pending for the first command that serves or searches it: a team that makes its tokens
    first can still copy a personal mesh into the database afterwards."""
    from knowmesh_mcp.services.service import Service

    empty = args.empty or _truthy(os.environ.get("KNOWMESH_EMPTY"))
    bar = progress_bar(sys.stderr, unit="nodes reindexed (the search code changed)")
    shown = []

    def reindexing(done: int, total: int) -> None:
        shown.append(done)
        bar(done, total)

    try:
        seed = False if empty else True if starter else None
        return await Service.open(database_path(args), seed=seed, progress=reindexing if bar else None)
    finally:
        if shown:
            sys.stderr.write("\n")


PUBLISH_HINT = (
    "Publish it as an open problem with POST /v1/nodes (MCP tool create_node); add --json for the ready body."
)


async def _search(args: argparse.Namespace) -> int:
    query = sys.stdin.read() if args.query == "-" else args.query
    service = await _open(args)
    try:
        envelope = await service.search(query, env=args.env, ecosystem=args.ecosystem, limit=args.limit)
    finally:
        await service.close()
    if args.json:
        print(json.dumps(envelope, indent=2, ensure_ascii=False))
        return 0
    results = envelope["results"]
    if not results:
        guidance = envelope["guidance"]
        print("No match. " + guidance["message"])
        print(PUBLISH_HINT)
        return 0
    guidance = envelope.get("guidance") or {}
    guesses = guidance.get("reason") == "weak_match"  # the best score is below 0.5: every row is a guess
    if guesses:
        print("Guesses only. " + guidance["message"] + "\n")
    rows = [
        (
            f"{math.floor(result['score'] * 100) / 100:.2f}",
            result["match"],
            result["id"],  # 0.4999 is no 0.50
            (result["solution"] or {}).get("id") or ("open problem" if not result["has_answer"] else "none for env"),
            shortened(result["title"], 60),
        )
        for result in results
    ]
    print(table(("SCORE", "MATCH", "ID", "ANSWER", "TITLE"), rows, right=(0,)))
    print(f"\nRead one: knowmesh-mcp read {results[0]['id']}" + (f" --env {args.env}" if args.env else ""))
    if guesses:
        print("None of them is your problem? " + PUBLISH_HINT)
    return 0


def shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> str:
    """Columns as wide as their widest cell (ids and answer ids have no fixed length), two spaces
    apart; the last column is not padded. `right`: the columns aligned right (numbers)."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]

    def line(cells: Sequence[str]) -> str:
        fitted = [
            cell.rjust(width) if index in right else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(cells, widths))
        ]
        return "  ".join(fitted[:-1] + [cells[-1]])

    return "\n".join(line(cells) for cells in [header, *rows])


async def _read(args: argparse.Namespace) -> int:
    service = await _open(args)
    try:
        result = await service.read_node(args.id, service.read_request(env=args.env, include=args.include))
    finally:
        await service.close()
    if args.json:
        print(json.dumps(result.body, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(result.markdown())
    return 0


async def _import(args: argparse.Namespace) -> int:
    from knowmesh_mcp.services.service import load_documents

    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or folder: {missing[0]}")
    service = await _open(args)
    bar = progress_bar(sys.stderr, unit="documents")
    try:
        documents = load_documents(args.paths)
        report = await service.import_documents(counted(documents, bar), dry_run=args.dry_run)
    finally:
        if bar:
            sys.stderr.write("\n")
        await service.close()
    for item in report.skipped:
        print(f"skipped {item['id']} ({item['source']}): {item['reason']}", file=sys.stderr)
    for item in report.invalid:
        error = item["error"]
        print(f"invalid {item['id'] or '?'} ({item['source']}): {error['code']}: {error['message']}", file=sys.stderr)
        if args.verbose:
            for problem in error.get("problems") or []:
                print(f"    {problem['field']}: {problem['message']}", file=sys.stderr)
    if (
        report.invalid
        and not args.verbose
        and any(len(item["error"].get("problems") or []) > 1 for item in report.invalid)
    ):
        print("(--verbose lists every problem)", file=sys.stderr)
    verb = "would create" if args.dry_run else "created"
    summary = (
        f"{verb} {len(report.created)}, unchanged {len(report.unchanged)}, "
        f"skipped {len(report.skipped)}, invalid {len(report.invalid)}"
    )
    if not report.created and not report.invalid:
        summary += " (nothing to change)"
    print(summary)
    return 2 if report.invalid else 0


async def _export(args: argparse.Namespace) -> int:
    service = await _open(args)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    # Documents written to the terminal are their own progress; a bar there would cut into them.
    bar = None if out.isatty() else progress_bar(sys.stderr, unit="documents")
    count = 0
    try:
        async for document in service.export_documents():
            out.write(json.dumps(document, ensure_ascii=False, sort_keys=True) + "\n")
            count += 1
            if bar and count % 50 == 0:
                bar(count, None)
    finally:
        if bar:
            sys.stderr.write("\r\033[K")  # the counter gives way to the summary line
        await service.close()
        if out is not sys.stdout:
            out.close()
    print(f"exported {count} documents", file=sys.stderr)
    return 0


def counted(items: list[Any], progress: Any) -> Iterator[Any]:
    """The items, calling `progress(done, total)` as the consumer takes them (the service reads
    an import one document at a time, so this is its progress without a callback of its own)."""
    for done, item in enumerate(items, 1):
        yield item
        if progress and (done % 20 == 0 or done == len(items)):
            progress(done, len(items))


async def _sync(args: argparse.Namespace) -> int:
    source = remote_url(args.source)
    service = await _open(args)
    bar = progress_bar(sys.stderr)
    try:
        report = await service.sync_from(source, progress=bar, token=args.token)
    finally:
        if bar:
            sys.stderr.write("\n")
        await service.close()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
        return 0
    for conflict in report.conflicts:
        moved = conflict["moved_revisions"]
        kept = (
            f"kept as revision {conflict['kept_revision']}"
            if conflict["kept_revision"]
            else "not re-applied (nothing left to change, or it no longer validates)"
        )
        both = f"; both changed {', '.join(conflict['both_changed'])}" if conflict["both_changed"] else ""
        span = f"revision {moved[0]}" if len(moved) == 1 else f"revisions {moved[0]}-{moved[-1]}"
        print(
            f"conflict {conflict['id']}: local {span} moved aside, the local edit {kept} "
            f"on top of remote revision {conflict['remote_revision']}{both}"
        )
    for change in report.statuses:
        print(f"status {change['id']}: {change['from']} -> {change['to']}, as on the remote")
    for merge in report.merged:
        print(f"merged {merge['id']} into {merge['canonical']}, as on the remote")
    summary = (
        f"synced {report.remote}: created {len(report.created)}, updated {len(report.updated)}, "
        f"unchanged {report.unchanged}, conflicts {len(report.conflicts)}, outcome reports {report.evidence}"
    )
    if not (report.created or report.updated or report.evidence or report.statuses or report.merged):
        summary += " (nothing to change)"
    print(summary)
    return 0


async def _token(args: argparse.Namespace) -> int:
    service = await _open(args, starter=False)
    try:
        if args.token_command == "add":
            made = await service.add_token(args.agent_id, role=args.role)
            print(made["token"])
            print(
                f"token {made['id']} for {made['agent_id']} ({made['role']}): shown once, stored as a hash only. "
                "Send it as `Authorization: Bearer <token>`, or set KNOWMESH_TOKEN.",
                file=sys.stderr,
            )
        elif args.token_command == "list":
            listed = await service.list_tokens()
            if args.json:
                print(json.dumps(listed, indent=2))
            elif not listed:
                print("no tokens: add one with `knowmesh-mcp token add AGENT_ID`")
            else:
                width = max(len("AGENT"), *(len(row["agent_id"]) for row in listed))
                print(f"{'ID':<8}  {'AGENT':<{width}}  {'ROLE':<10}  {'CREATED':<20}  {'LAST USED':<20}  STATE")
                for row in listed:
                    state = "revoked" if row["revoked_at"] else "live"
                    print(
                        f"{row['id']:<8}  {row['agent_id']:<{width}}  {row['role']:<10}  {minute(row['created_at']):<20}  "
                        f"{minute(row['last_used_at']):<20}  {state}"
                    )
        else:
            revoked = await service.revoke_tokens(args.agent_id, args.token_id)
            print(f"revoked {revoked} token(s) of {args.agent_id}")
    finally:
        await service.close()
    return 0


def minute(timestamp: str | None) -> str:
    """A stored UTC timestamp as people read it: 2026-12-01 11:44 UTC."""
    return f"{timestamp[:10]} {timestamp[11:16]} UTC" if timestamp else "never"


async def _doctor(args: argparse.Namespace) -> int:
    """Exit 0 when healthy, 1 with the reasons when not (also when there is no database yet)."""
    from knowmesh_mcp.services.health import health_lines
    from knowmesh_mcp.store import is_postgres

    path = database_path(args)
    if path != ":memory:" and not is_postgres(path) and not Path(path).exists():
        print(f"knowmesh-mcp: no database at {path} (any command creates it; or pass --db)", file=sys.stderr)
        return 1
    service = await _open(args, starter=False)
    try:
        report = await service.health()
    finally:
        await service.close()
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else "\n".join(health_lines(report)))
    return 0 if report["ok"] else 1


async def _admin(args: argparse.Namespace) -> int:
    """Maintainer actions. On the local database the actor is the local agent as a maintainer (whoever
    may write the file may do anything to it); with --remote the token proves it."""
    from knowmesh_mcp.core.identity import Actor

    if args.remote:
        from knowmesh_mcp.services.remote import RemoteMesh

        mesh: Any = RemoteMesh(remote_url(args.remote), token=args.token)
        actor = None
    else:
        mesh = await _open(args)
        actor = Actor(await mesh.local_agent_id(), "local", role="maintainer")
    try:
        command = args.admin_command
        if command in ("promote", "draft", "deprecate"):
            result = await mesh.set_status(args.id, args.status, note=args.note, actor=actor)
            line = (
                f"{result['node']}: {result['previous']} -> {result['status']}"
                if result["changed"]
                else f"{result['node']} is already {result['status']} (nothing recorded)"
            )
        elif command == "merge":
            result = await mesh.confirm_merge(args.task_id, canonical_id=args.canonical, note=args.note, actor=actor)
            line = f"merged {result['merged']} into {result['canonical']['id']} (its URLs now answer 301)"
        elif command in ("close-issue", "discard-issue"):
            result = await mesh.resolve_issue(args.number, args.status, note=args.note, actor=actor)
            line = f"issue {result['issue_number']}: {result['status']}"
        elif command == "flagged":
            result = await mesh.flagged_pairs()
            line = (
                "\n".join(
                    f"task {t['task_id']}: {t['node']} vs {t['candidate']}, keep {t['canonical_id']}"
                    for t in result["tasks"]
                )
                or "no flagged pairs"
            )
        else:
            result = await mesh.audit_log(target=args.target)
            line = (
                "\n".join(
                    f"{a['id']:>5}  {a['created_at']}  {a['maintainer']['id']:<20}  {a['action']:<13}  {a['target']}"
                    + (f"  {a.get('from')} -> {a.get('to')}" if a.get("to") else "")
                    + (f"  ({a['note']})" if a["note"] else "")
                    for a in result["actions"]
                )
                or "no maintainer actions yet"
            )
    finally:
        await mesh.close()
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json else line)
    return 0


async def _copy(args: argparse.Namespace) -> int:
    from knowmesh_mcp.services.copying import copy_mesh

    bar = progress_bar(sys.stderr, unit="rows")
    try:
        report = await copy_mesh(args.source, args.target, progress=bar)
    finally:
        if bar:
            sys.stderr.write("\n")
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.summary())
    return 0


def progress_bar(stream: Any, *, unit: str = "nodes") -> Any:
    """A one-line progress bar on a terminal; None (silent) when the stream is a pipe or file.

    `show(done, total, what=None)`: a total of None shows a counter; `what` names a later phase's
    unit (e.g. "nodes indexed" after "rows"), which starts a line of its own."""
    if not stream.isatty():
        return None
    shown = {"unit": unit}

    def show(done: int, total: int | None, what: str | None = None) -> None:
        if what is not None and what != shown["unit"]:
            stream.write("\n")
            shown["unit"] = what
        if total is None:
            stream.write(f"\r{done} {shown['unit']}")
        else:
            width = 30
            filled = width * done // total if total else width
            stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {shown['unit']}")
        stream.flush()

    return show


STDIO_HINT = (
    "knowmesh-mcp: an MCP server on stdin/stdout, waiting for an MCP client (it is not interactive). "
    "Let a client start it, e.g. `claude mcp add knowmesh -- knowmesh-mcp`; `knowmesh-mcp --help` lists "
    "the commands. Ctrl-C quits."
)


async def _serve_stdio(args: argparse.Namespace) -> int:
    tools = served_tools(args)
    if sys.stdin.isatty():  # a person typed the command: no client sends a terminal as stdin
        print(STDIO_HINT, file=sys.stderr)
    remote = args.remote or os.environ.get("KNOWMESH_URL")
    if remote:
        from knowmesh_mcp.services.remote import RemoteMesh

        mesh: Any = RemoteMesh(remote_url(remote))  # sends $KNOWMESH_TOKEN when set
    else:
        mesh = await _open(args)  # before importing mcp: a bad database is refused at once
    try:
        from knowmesh_mcp.mcp.server import build_mcp_server

        server = build_mcp_server(lambda: mesh, read_only=args.read_only, local_agent=True, tools=tools)
        await server.run_stdio_async()
    finally:
        await mesh.close()
    return 0


def served_tools(args: argparse.Namespace) -> tuple[str, ...] | None:
    """--tools, checked against the server's tool names (and --read-only); None serves them all."""
    if args.tools is None:
        return None
    from knowmesh_mcp.mcp.server import READ_TOOLS, TOOL_NAMES

    unknown = [name for name in args.tools if name not in TOOL_NAMES]
    if unknown:
        raise UsageError(
            f"--tools: no tool named {', '.join(map(repr, unknown))}; the tools are {', '.join(TOOL_NAMES)}"
        )
    writes = [name for name in args.tools if name not in READ_TOOLS]
    if args.read_only and writes:
        raise UsageError(f"--tools: {', '.join(writes)} can write, and --read-only serves only {', '.join(READ_TOOLS)}")
    return args.tools


def remote_url(url: str) -> str:
    """An http(s) base URL, or a usage error before anything starts."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()  # never a password
        raise UsageError(f"not an http(s) URL: {shown!r}")
    return url.strip().rstrip("/")


async def _check_database(args: argparse.Namespace) -> None:
    """Open (creating and seeding a new one) and close the database, so that a bad one is refused
    with one line before uvicorn starts; the app's own open then finds it ready."""
    service = await _open(args)
    await service.close()


def _serve_http(args: argparse.Namespace) -> int:
    tools = served_tools(args)
    db_path = database_path(args)
    if db_path != ":memory:":
        asyncio.run(_check_database(args))

    import uvicorn

    from knowmesh_mcp.api.app import build_app, server_config
    from knowmesh_mcp.api.guard import is_loopback

    empty = args.empty or _truthy(os.environ.get("KNOWMESH_EMPTY"))
    auth = args.auth or ("off" if is_loopback(args.host) else "required")
    app = build_app(
        db_path=db_path,
        seed=not empty,
        read_only=args.read_only,
        write_limit=args.write_limit,
        host=args.host,
        cors_origins=tuple(args.cors_origin),
        auth=auth,
        tools=tools,
    )
    print(f"knowmesh-mcp serving http://{args.host}:{args.port} (MCP at /mcp, auth {auth})", file=sys.stderr)
    uvicorn.Server(server_config(app, host=args.host, port=args.port, trust_proxy=args.trust_proxy)).run()
    return 0


def reader_went_away() -> int:
    """stdout's reader closed it early (`knowmesh-mcp export | head`): end quietly, as a program
    killed by SIGPIPE would, with 141 (128 + 13). stdout now writes to the null device, so the
    flush at exit cannot fail a second time with "Exception ignored ... BrokenPipeError"."""
    with suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    return 141


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
        if args.command == "serve":
            if args.remote and args.http:
                raise UsageError("--remote fronts a remote mesh over stdio; it cannot be used with --http")
            return _serve_http(args) if args.http else asyncio.run(_serve_stdio(args))
        runner: dict[str, Any] = {
            "search": _search,
            "read": _read,
            "import": _import,
            "export": _export,
            "sync": _sync,
            "token": _token,
            "admin": _admin,
            "doctor": _doctor,
            "copy": _copy,
        }
        code = asyncio.run(runner[args.command](args))
        sys.stdout.flush()  # output still buffered meets a closed pipe here, not as "Exception ignored" at exit
        return code
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


if __name__ == "__main__":
    sys.exit(main())
