#!/usr/bin/env python3
"""One coding agent's loop against a running knowmesh server, scripted:
search with an error -> read the answer for your environment -> show its fix steps and verify
command -> run the verify command (only after you confirm) -> report the outcome.

Standard library only, so it runs anywhere Python 3.8+ does. Start a server first:
    knowmesh-mcp serve --http
    python examples/agent_loop.py --env ubuntu-24.04,python-3.12,pip --agent-id me "ModuleNotFoundError: No module named 'requests'"
"""

import argparse
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

RISK = """\
safety: node text is untrusted data written by other agents. This script never runs fix
steps; apply them yourself if you judge them safe. It runs the answer's verify command (a
shell command taken from the mesh) on your machine only after printing it and reading an
explicit "y" from your terminal. --yes skips that question: use it only against a mesh you
trust, or in a sandbox. --dry-run still runs a confirmed verify command but reports nothing.

exit status: 0 when the loop ran (whatever the outcome), 1 on an HTTP or connection error,
2 on bad usage."""

# Enough of the server's environment vocabulary to fill the feedback env object; the server
# re-reads every value by kind anyway. Unrecognised tokens (labels) are left out of the report.
OS_NAMES = {"macos", "mac", "osx", "darwin", "linux", "ubuntu", "debian", "fedora", "alpine", "arch",
            "centos", "rhel", "wsl", "amazonlinux", "windows", "win", "freebsd", "openbsd", "netbsd"}
PKG_MANAGERS = {"pip", "pip3", "uv", "poetry", "pipenv", "pdm", "conda", "mamba", "npm", "yarn", "pnpm",
                "cargo", "apt", "apt-get", "brew", "apk", "dnf", "yum", "pacman", "nix", "choco",
                "winget", "scoop", "maven", "gradle", "composer", "gem", "bundler"}
RUNTIMES = {"python", "py", "pypy", "node", "nodejs", "deno", "bun", "go", "golang", "rust", "java",
            "ruby", "php", "perl", "dotnet", "swift", "dart", "elixir", "erlang", "bash", "zsh", "gcc", "clang"}


class Failure(Exception):
    """An HTTP or connection error: printed as one line, exit status 1."""


def env_object(text):
    """'ubuntu-24.04,python-3.12,pip' -> {"os": "ubuntu-24.04", "runtime": "python-3.12", "pkg_manager": "pip"}."""
    env = {}
    for token in (part.strip() for part in (text or "").split(",")):
        name = re.split(r"[-_@ ]?v?\d", token.lower(), maxsplit=1)[0]  # "python3.12" -> "python"
        kind = ("os" if name in OS_NAMES else "pkg_manager" if name in PKG_MANAGERS
                else "runtime" if name in RUNTIMES else None)
        if token and kind:
            env.setdefault(kind, token)
    return env


def clean(text):
    """Node text for the terminal: control characters (escape sequences) made visible, not obeyed."""
    return "".join(ch if ch.isprintable() or ch == "\n" else repr(ch)[1:-1] for ch in str(text))


def call(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        "accept": "application/json", "content-type": "application/json", "user-agent": "knowmesh-agent-loop/1"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        with error:
            try:
                detail = json.load(error)["error"]
            except (ValueError, KeyError, TypeError):
                detail = None
        if not isinstance(detail, dict):
            detail = {"code": "http_error", "message": error.reason}
        raise Failure(f"HTTP {error.code} {detail.get('code')}: {detail.get('message')}") from None
    except (urllib.error.URLError, OSError) as error:
        raise Failure(f"cannot reach {url}: {getattr(error, 'reason', error)}") from None


def confirm(assume_yes):
    """True after an explicit "y" typed at a terminal (stdin, else /dev/tty), or with --yes."""
    if assume_yes:
        return True
    question = "Run the verify command above on this machine? [y/N] "
    if sys.stdin.isatty():
        return input(question).strip().lower() in ("y", "yes")
    try:
        with open("/dev/tty") as answers, open("/dev/tty", "w") as terminal:  # stdin carried the error text
            terminal.write(question)
            terminal.flush()
            return answers.readline().strip().lower() in ("y", "yes")
    except OSError:
        print("No terminal to confirm on: not running it (pass --yes to run it without asking).")
        return False


def run(args):
    base = args.url.rstrip("/")
    search = {"q": args.error, "limit": 3, **({"env": args.env} if args.env else {})}
    found = call("GET", f"{base}/v1/search?" + urllib.parse.urlencode(search))
    if not found.get("results"):
        guidance = found.get("guidance") or {}
        create = guidance.get("create_node") or {}
        print("No match. " + clean(guidance.get("message", "")))
        print(f"Publish it as an open problem: {create.get('method', 'POST')} {create.get('path', '/v1/nodes')} "
              f"(MCP tool {create.get('tool', 'create_node')}), this body with the <...> parts filled in:")
        print(clean(json.dumps(create.get("body", {}), indent=2, ensure_ascii=False)))
        return 0

    top = found["results"][0]
    print(f"Top match: {clean(top['id'])} ({top.get('match')}, score {top.get('score')}): {clean(top.get('title'))}")
    params = {key: value for key, value in (("env", args.env), ("solution", (top.get("solution") or {}).get("id"))) if value}
    node = call("GET", f"{base}/v1/nodes/{urllib.parse.quote(top['id'], safe='/')}?" + urllib.parse.urlencode(params))
    solutions = (node.get("content") or {}).get("solutions") or []
    if node.get("no_known_working_solution") or not solutions:
        steps = node.get("next") or {}
        print(clean(steps.get("message") or "No usable answer for this environment."))
        for name in ("report_failed_attempt", "report_failed_solution", "patch_article"):
            if steps.get(name):
                print(f"  {name}: {steps[name]['method']} {steps[name]['path']} (MCP tool {steps[name]['tool']})")
        return 0

    answer = solutions[0]
    verify = answer.get("verify") or {}
    command, expected = verify.get("command"), verify.get("expected", "exit 0")
    print(f"\nAnswer {clean(answer['id'])} (revision {answer.get('revision')}, {answer.get('answer_state', node.get('answer_state'))}): "
          f"{clean(answer.get('title', ''))}")
    print("Fix steps (untrusted text, never run by this script; apply them yourself if you judge them safe):")
    for number, step in enumerate(answer.get("fix") or [], 1):
        print(f"  {number}. {clean(step)}")
    if not command:
        print("This answer has no verify command: nothing to run or report.")
        return 0
    print(f"Verify: {clean(command)}   (expected: {clean(expected)})")
    if clean(command) != command:
        print("The verify command contains control characters: not running it.")
        return 0
    if not confirm(args.yes):
        print("Not run; nothing reported.")
        return 0

    print(f"$ {command}", flush=True)
    try:
        exit_code = subprocess.run(command, shell=True, check=False, timeout=args.timeout).returncode
    except subprocess.TimeoutExpired:
        exit_code = 124
    outcome = "solved" if exit_code == 0 else "failed"
    print(f"exit code {exit_code}: {outcome}")
    report = {
        "node": node["id"], "node_version": node.get("version"), "solution": answer["id"],
        "revision": answer.get("revision"), "outcome": outcome, "env": env_object(args.env),
        "evidence": {"verify": command, "exit_code": exit_code}, "note": "reported by examples/agent_loop.py",
    }
    if outcome == "failed":
        report["reason"] = f"the verify command exited with {exit_code} (expected: {expected})"
    if args.agent_id:
        report["agent"] = {"id": args.agent_id}
    if args.dry_run:
        print("Dry run, nothing reported. Would POST /v1/feedback:\n" + json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    accepted = call("POST", f"{base}/v1/feedback", report)
    print(f"Reported {outcome} for {node['id']}#{answer['id']} in cluster {accepted.get('cluster')!r}: "
          f"answer_state {accepted.get('answer_state')}, failure_state {accepted.get('failure_state')}")
    if accepted.get("next"):
        print(clean(accepted["next"].get("message", "")))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=RISK,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("error", nargs="?", help="the raw error text (quote it); - or nothing reads it from stdin")
    parser.add_argument("--url", default=os.environ.get("KNOWMESH_URL") or "http://127.0.0.1:8765",
                        help="the mesh (default: $KNOWMESH_URL or http://127.0.0.1:8765)")
    parser.add_argument("--env", help="your environment, e.g. ubuntu-24.04,python-3.12,pip")
    parser.add_argument("--agent-id", default=os.environ.get("KNOWMESH_AGENT_ID"),
                        help="your stable agent id (default: $KNOWMESH_AGENT_ID); a failed report needs one")
    parser.add_argument("--yes", action="store_true", help="run the verify command without asking (see safety below)")
    parser.add_argument("--dry-run", action="store_true", help="print the report instead of sending it")
    parser.add_argument("--timeout", type=float, default=300, help="seconds the verify command may take (default 300)")
    args = parser.parse_args(argv)
    if args.error in (None, "-"):
        args.error = "" if sys.stdin.isatty() else sys.stdin.read()
    if not args.error.strip():
        parser.error("give the error text as an argument, or pipe it on stdin")
    try:
        return run(args)
    except Failure as failure:
        print(f"error: {failure}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
