#!/usr/bin/env python3
"""One coding agent's loop against a running knowmesh server, scripted:
search with an error -> read the answer for your environment -> show its fix steps and verify
command -> run the verify command before the fix, as a baseline (only after you confirm) -> you
apply the fix and say so -> run the verify command again -> report that run's outcome.
A best result that scores below 0.5 is a guess, not the answer: nothing is run or reported for
it unless you accept it at your terminal (--yes does not).

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
the loop: the verify command runs first BEFORE the fix, as a baseline. It should fail: that
shows the problem is present here. If it already passes, nothing is reported (the problem is
not present on this machine, or the verify command does not reproduce it). Otherwise you apply
the fix steps yourself and confirm with "y" at the "Fix applied?" question; the verify command
runs again and only that run is reported: solved (exit code 0) or failed (its exit code and the
baseline's in the reason). "n", no answer, or no terminal to ask on: nothing is reported.
A verify command that exits 126 or 127 (the shell's "cannot execute" / "command not found")
could not run here, which says nothing about the problem or the fix: before the fix the loop
stops there, after it nothing is reported either (not failed, and not env_mismatch).

guesses: a result's score is calibrated in 0..1, and from 0.5 it is likely the right node. When
the best result scores below 0.5 it is shown as a guess, with its score and the server's
guidance (if none of the results is your problem, publish it as an open problem), never as the
answer. Nothing runs for a guess until you type "y" at "This is a guess ... Use it anyway?" on
your terminal: --yes does not answer that question, and with no terminal nothing is run or
reported. A guess accepted there goes through the loop like any answer, and its report says
the search scored it as a guess that you accepted; under --yes alone a guess is never run and
never reported.

safety: node text is untrusted data written by other agents. This script never runs fix
steps; apply them yourself if you judge them safe. It runs the answer's verify command (a
shell command taken from the mesh, with stdin closed) on your machine only after printing it
and reading an explicit "y" from your terminal. --yes skips that question, not the "Fix
applied?" one, nor "Use it anyway?" for a guess: use it only against a mesh you trust, or in a
sandbox. --dry-run still runs a confirmed verify command but reports nothing.

automation: --applied-on-stdin reads the answer to "Fix applied?" as one line of stdin instead
of the terminal, so a harness that holds the script's stdin (a pipe) can drive it: when the
question appears, apply the fix, then write "y" and a newline (any other line or the end of
input: nothing reported). The error text must then be an argument. With --yes as well, the
whole loop runs without a terminal for a likely match (a guess still needs one, see guesses
above: an unattended run stops at a guess). There is no flag that skips the "Fix applied?"
question: the script has to know when the fix went in, between the baseline and the run it
reports.

exit status: 0 when the loop ran (whatever the outcome, also when nothing was reported), 1 on
an HTTP or connection error, 2 on bad usage."""

# Enough of the server's environment vocabulary to fill the feedback env object; the server
# re-reads every value by kind anyway. Unrecognised tokens (labels) are left out of the report.
OS_NAMES = {"macos", "mac", "osx", "darwin", "linux", "ubuntu", "debian", "fedora", "alpine", "arch",
            "centos", "rhel", "wsl", "amazonlinux", "windows", "win", "freebsd", "openbsd", "netbsd"}
PKG_MANAGERS = {"pip", "pip3", "uv", "poetry", "pipenv", "pdm", "conda", "mamba", "npm", "yarn", "pnpm",
                "cargo", "apt", "apt-get", "brew", "apk", "dnf", "yum", "pacman", "nix", "choco",
                "winget", "scoop", "maven", "gradle", "composer", "gem", "bundler"}
RUNTIMES = {"python", "py", "pypy", "node", "nodejs", "deno", "bun", "go", "golang", "rust", "java",
            "ruby", "php", "perl", "dotnet", "swift", "dart", "elixir", "erlang", "bash", "zsh", "gcc", "clang"}


LIKELY = 0.5  # the server's calibrated score from which a result is likely the right node
CANNOT_RUN = {126: "found but not executable", 127: "command not found"}  # the shell's own exit codes


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
    headers = {"accept": "application/json", "content-type": "application/json", "user-agent": "knowmesh-agent-loop/1"}
    if os.environ.get("KNOWMESH_TOKEN"):  # a team's mesh proves who reports by this token
        headers["authorization"] = "Bearer " + os.environ["KNOWMESH_TOKEN"]
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
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


YES = ("y", "yes")


def ask(question, from_stdin=False):
    """The answer typed at a terminal (stdin, else /dev/tty), lower-cased; with from_stdin, one line
    read from stdin whatever it is. "" at the end of input; None when there is no terminal."""
    if from_stdin or sys.stdin.isatty():
        print(question, end="", flush=True)
        line = sys.stdin.readline()
        if not line.endswith("\n"):
            print()  # the end of input: finish the question's line
        return line.strip().lower()
    try:
        with open("/dev/tty") as answers, open("/dev/tty", "w") as terminal:  # stdin carried the error text
            terminal.write(question)
            terminal.flush()
            return answers.readline().strip().lower()
    except OSError:
        return None


def confirm(assume_yes):
    """True after an explicit "y" typed at a terminal, or with --yes: may the verify command run?"""
    if assume_yes:
        return True
    answer = ask("Run the verify command above on this machine, now (before the fix) and again once you "
                 "have applied it? [y/N] ")
    if answer is None:
        print("No terminal to confirm on: not running it (pass --yes to run it without asking).")
    return answer in YES


def fix_applied(from_stdin):
    """True after an explicit "y" once the user has applied the fix steps (never implied by --yes)."""
    answer = ask("Fix applied? Type y once you have applied the fix steps above, to run the verify command "
                 "again and report its result (n: stop, nothing reported) [y/N] ", from_stdin)
    if answer is None:
        print("No terminal to confirm the fix on (pass --applied-on-stdin to confirm it on stdin).")
    return answer in YES


def accept_guess(score):
    """True only after an explicit "y" typed at a terminal: may a guess (score below 0.5) be used?
    --yes never answers this, and --applied-on-stdin does not either (stdin is not asked)."""
    answer = ask(f"This is a guess (score {score}, below {LIKELY}): its answer may be for another problem. "
                 "Use it anyway, i.e. go on to run its verify command and report what happens? (--yes does "
                 "not answer this) [y/N] ")
    if answer is None:
        print("No terminal to ask on: a guess is used only after an explicit y there (--yes does not accept it).")
    return answer in YES


def is_guess(found, top):
    """A top result below the calibrated 0.5 (or without a score), or one the server flags as a weak match."""
    score = top.get("score")
    if (found.get("guidance") or {}).get("reason") == "weak_match":
        return True
    return isinstance(score, bool) or not isinstance(score, (int, float)) or score < LIKELY


def print_publish(guidance):
    """The server's ready create_node request for an open problem, to fill in."""
    create = (guidance or {}).get("create_node") or {}
    print(f"Publish it as an open problem: {create.get('method', 'POST')} {create.get('path', '/v1/nodes')} "
          f"(MCP tool {create.get('tool', 'create_node')}), this body with the <...> parts filled in:")
    print(clean(json.dumps(create.get("body", {}), indent=2, ensure_ascii=False)))


def run_verify(command, timeout):
    """The verify command's exit code (124 when it timed out), run by the shell with stdin closed."""
    print(f"$ {command}", flush=True)
    try:
        return subprocess.run(command, shell=True, check=False, stdin=subprocess.DEVNULL, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"timed out after {timeout:g} s")
        return 124


def run(args):
    base = args.url.rstrip("/")
    search = {"q": args.error, "limit": 3, **({"env": args.env} if args.env else {})}
    found = call("GET", f"{base}/v1/search?" + urllib.parse.urlencode(search))
    guidance = found.get("guidance") or {}
    if not found.get("results"):
        print("No match. " + clean(guidance.get("message", "")))
        print_publish(guidance)
        return 0

    top = found["results"][0]
    score = top.get("score")
    guess = is_guess(found, top)
    if guess:
        print(f"No likely match: the best result scores {clean(score)}, below {LIKELY}. It is a guess, not the answer.")
        print(f"Guess: {clean(top['id'])} ({top.get('match')}, score {clean(score)}): {clean(top.get('title'))}")
        print(clean(guidance.get("message") or "No result is a likely match: read them as hints, and if none "
                    "is your problem, publish it as an open problem."))
    else:
        print(f"Top match: {clean(top['id'])} ({top.get('match')}, score {score}): {clean(top.get('title'))}")
    params = {key: value for key, value in (("env", args.env), ("solution", (top.get("solution") or {}).get("id"))) if value}
    node = call("GET", f"{base}/v1/nodes/{urllib.parse.quote(top['id'], safe='/')}?" + urllib.parse.urlencode(params))
    solutions = (node.get("content") or {}).get("solutions") or []
    if node.get("no_known_working_solution") or not solutions:
        if guess:
            print("The guess has no usable answer for this environment either: nothing to run or report.")
            print_publish(guidance)
            return 0
        steps = node.get("next") or {}
        print(clean(steps.get("message") or "No usable answer for this environment."))
        for name in ("report_failed_attempt", "report_failed_solution", "patch_article"):
            if steps.get(name):
                print(f"  {name}: {steps[name]['method']} {steps[name]['path']} (MCP tool {steps[name]['tool']})")
        return 0

    answer = solutions[0]
    verify = answer.get("verify") or {}
    command, expected = verify.get("command"), verify.get("expected", "exit 0")
    label = "The guess's answer" if guess else "Answer"
    print(f"\n{label} {clean(answer['id'])} (revision {answer.get('revision')}, {answer.get('answer_state', node.get('answer_state'))}): "
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
    if guess and not accept_guess(score):
        print("Guess not used: nothing run, nothing reported.")
        print_publish(guidance)
        return 0
    if not confirm(args.yes):
        print("Not run; nothing reported.")
        return 0

    print("Baseline, before the fix: the verify command should fail here, showing the problem is present.")
    baseline = run_verify(command, args.timeout)
    if baseline in CANNOT_RUN:
        print(f"Baseline: exit code {baseline} ({CANNOT_RUN[baseline]}): the verify command cannot run here, so it "
              "says nothing about whether the problem is present. Stopping; nothing reported. Make it runnable "
              "(install what it needs) or check by hand, then run the loop again.")
        return 0
    if baseline == 0:
        print("The verify command already passes before any fix (exit code 0): the problem is not present on "
              "this machine, or this verify command does not reproduce it. Nothing to fix; nothing reported.")
        return 0
    print(f"Baseline: exit code {baseline}, the problem is present.")
    print("Now apply the fix steps above yourself (this script never runs them).")
    if not fix_applied(args.applied_on_stdin):
        print("Fix not confirmed; verify not run again, nothing reported.")
        return 0

    print("After the fix:")
    exit_code = run_verify(command, args.timeout)
    if exit_code in CANNOT_RUN:
        print(f"exit code {exit_code} ({CANNOT_RUN[exit_code]}; baseline {baseline}): the verify command cannot run "
              "here after the fix, so it says nothing about whether the fix worked. Nothing reported: not failed, "
              "and not env_mismatch either (this exit code is about this machine's shell and PATH, not about the "
              "answer's environment). Make the command runnable, or check the fix by hand.")
        return 0
    outcome = "solved" if exit_code == 0 else "failed"
    print(f"exit code {exit_code} (baseline {baseline}): {outcome}")
    report = {
        "node": node["id"], "node_version": node.get("version"), "solution": answer["id"],
        "revision": answer.get("revision"), "outcome": outcome, "env": env_object(args.env),
        "evidence": {"verify": command, "exit_code": exit_code},
        "note": f"reported by examples/agent_loop.py: verify exited with {baseline} before the fix, {exit_code} after it",
    }
    if guess:  # only reached after an explicit y at the terminal: say the search called it a guess
        report["note"] += (f"; the search scored this node {score} (below {LIKELY}: a guess), used after an "
                           "explicit y at the terminal")
    if outcome == "failed":
        report["reason"] = (f"after applying the fix, the verify command still exited with {exit_code} "
                            f"(expected: {expected}); before the fix (baseline) it exited with {baseline}")
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
    parser.add_argument("--yes", action="store_true",
                        help="run the verify command without asking (see safety below); you still confirm the fix, "
                             "and accept a guess (score below 0.5) at the terminal")
    parser.add_argument("--applied-on-stdin", action="store_true",
                        help='read the answer to "Fix applied?" as one line of stdin, not the terminal (automation)')
    parser.add_argument("--dry-run", action="store_true", help="print the report instead of sending it")
    parser.add_argument("--timeout", type=float, default=300, help="seconds the verify command may take (default 300)")
    args = parser.parse_args(argv)
    if args.error in (None, "-"):
        if args.applied_on_stdin:
            parser.error("--applied-on-stdin reads its answer from stdin: give the error text as an argument")
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
