"""Pasted tool output: which of its lines name the error.

Agents paste whatever their tool printed: a traceback, a CI log with timestamps and step ids,
a BuildKit build, pytest's report, a Gradle failure. The line that names the cause is seldom
the first or the last one, and tools end with a wrapper line ("did not complete successfully:
exit code: 1", "Process completed with exit code 1", "make: *** [all] Error 1") that names
nothing. `scan` strips each line's transport prefixes (timestamps, step ids, CI annotations,
pytest's `E   `, ANSI escapes, `> ` quoting, container name columns), judges it, and returns the
decisive lines strongest first: cause lines before wrapper lines, the last exception of a
Python traceback and the deepest `Caused by:` of a Java chain first.

Input of any size is scanned whole in bounded time: past `FULL_SCAN_LINES` lines only lines
holding an error keyword (found by plain substring search, at C speed) are judged. Depends
only on `normalize`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from knowmesh_mcp.core.normalize import normalize_signature

# Line ranks: lower is more decisive. Causes take 0..3; wrappers and unknown lines come after.
EXCEPTION, ERROR, PHRASE, WARNING, WRAPPER, CONTEXT = range(6)
DECISIVE_LIMIT = 6  # decisive lines kept: each is hashed and its terms searched
FULL_SCAN_LINES = 4000  # below this many lines every line is judged
KEYWORD_LINES = 600  # past it, at most this many keyword lines (the first third, the last two thirds)
MAX_LINE_CHARS = 2000  # a longer line is judged by its first MAX_LINE_CHARS characters

# Terminal escapes (CSI, OSC, two-byte) and SGR codes whose ESC byte was lost on the way.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]|(?:\^\[)?\[\d+(?:;\d+)*m"
)

# Transport prefixes, applied repeatedly at the start of a line: they say when and where a line
# was printed, never what went wrong.
_PREFIX = re.compile(
    r"""^(?:
        \s+
      | \#\#\[[a-z]+\]                                  # GitHub Actions: ##[error] ##[group]
      | ::(?:error|warning|notice|debug)[^:\n]*::       # workflow commands: ::error file=x::
      | \[?\d{4}[-/]\d\d[-/]\d\d(?:[T\s]\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?)?(?:Z|\s?[+-]\d\d:?\d\d|\s?UTC)?\]?:?(?=\s)  # ISO / Go log time
      | \[?\d\d:\d\d:\d\d(?:[.,]\d+)?\]?(?=\s)           # time of day: 10:00:01.123
      | [IWEF]\d{4}\s\d\d:\d\d:\d\d\.\d+\s+\d+\s[\w.-]+:\d+\]   # klog (kubelet, kubectl -v): E0831 04:12:41.86 3570 x.go:157]
      | \#\d+\s(?:\d+\.\d+\s)?                           # BuildKit: '#12 0.915 '
      | (?:app|heroku)\[[\w.-]+\]:(?=\s)                  # Heroku: app[web.1]:
      | [A-Za-z][\w.-]*\s+\|(?=\s|$)                     # compose: 'web-1  | '
      | [│┃╎║]                                           # box drawing (rich, Collision tracebacks)
      | \*\*(?=\S)                                        # Markdown bold around a pasted line
      | [E>](?=\s{2,}\S)                                 # pytest: 'E   ' and '>   ' columns
      | >(?=\s|$)                                        # quoting, Gradle's nesting
      | \[(?:INFO|DEBUG|TRACE|WARN|WARNING|ERROR|ERR|FATAL|SEVERE|CRITICAL|stderr|stdout)\](?=\s)  # log levels in brackets
      | (?:stderr|stdout|remote):(?=\s)                  # stream names
      | (?:npm|gyp|yarn)\s(?:ERR!|error)(?=\s|$)         # npm's and node-gyp's line labels (npm 6: ERR!, npm 7+: error)
      | (?:\d+\s)+(?=(?:error|verbose|silly|info|http|timing|warn)\s)  # npm-debug.log line counters
      | (?:verbose|silly)\s(?:stack\s)?                   # npm-debug.log levels below warn
      | stack\s(?=\S*(?:Error|Exception))                # gyp ERR! stack Error: ...
      | @+\s+(?=\S)                                       # ssh's banner: '@  WARNING: ... @'

    )+""",
    re.VERBOSE,
)
# Prefixes that say the line is an error line (a CI annotation, a log level, klog's E/F).
_ERROR_LEVEL = re.compile(r"^\s*(?:\#\#\[error\]|::error|\[(?:ERROR|ERR|FATAL|SEVERE|CRITICAL)\]|[EF]\d{4}\s\d\d:)")

# Cause lines, by rank. Each pattern is searched in the line without its prefixes.
_EXCEPTION = re.compile(
    r"^(?:Caused by:\s*|Exception in thread \"[^\"]*\"\s*|Uncaught\s+|Unhandled\s+(?:exception|rejection):?\s*)?"
    r"(?:[\w$]+[.:]{1,2})*(?:(?:[A-Z]\w*)?(?:Error|Exception|Exit|Failure|Fault|Interrupt|Panic)|[A-Z]\w+Warning)\b"
    r"(?::|$| \[[A-Z][A-Z_]+\]:)"
    r"|^(?:panic|fatal error|thread '[^']*' panicked at)\b"
    r"|^(?:\S+\s*:\s*)?(?:error|warning)(?::\s*|\s*\[?)[A-Z]{1,6}\d{3,5}\]?:"  # error[E0382]: error TS2307: error: GH001:
    r"|^[A-Z]{2,6}\d{3,5}:\s"  # TS2307: (a code of its own)
    r"|^(?:Error|error): [A-Z][A-Z_]{3,}\b"  # Error: EACCES ..., Error: ENOENT
    r"|\((?:[A-Z]\w*::)*[A-Z]\w*(?:Error|Exception)\)$"  # Ruby: message (LoadError)
    r"|^WARNING: (?:REMOTE HOST IDENTIFICATION HAS CHANGED|POSSIBLE DNS SPOOFING)"  # ssh: the cause, not a warning
)
_ERROR = re.compile(
    r"^(?:[Ee]rror|[Ff]atal|panic|failure|critical)(?:\[\w+\])?\s*:"  # git fatal:, rustc error:, cargo
    r"|^(?:ERROR|FATAL|PANIC)\b"  # postgres ERROR:  ..., ERROR ...
    r"|^\S+:\d+:(?:\d+:)?\s"  # file:line[:col]: message (go build, gcc, eslint, make)
    r"|^\S+\(\d+,\d+\):\s"  # tsc, MSBuild file(line,col): message
    r"|^[\w./-]+(?:\[\d+\])?: \*\*\* "  # make's fatal errors: make: *** No rule to make target 'x'.  Stop.
    r"|^Error from server\b|^Error response from daemon\b|^! \[(?:remote )?rejected\]|are too open\.?$|not installed\?$"
    r"|^[\w./@+-]+:\s+(?:[\w./-]+:\s+)?(?:line \d+:\s+)?\S.*"  # tool: message (bash: x: command not found, sed: 1: ...)
    r"(?:not found|denied|refused|invalid|No such|cannot|can't|unable|failed|error|unknown|missing|not a|does not)"
)
_PHRASE = re.compile(
    r"error|Error|ERROR|fail|FAIL|cannot|can't|Cannot|unable|Unable|could not|Could not|couldn't|"
    r"No such file|not found|Not found|NOT FOUND|denied|Denied|refused|undefined|Undefined|invalid|Invalid|"
    r"unsupported|Unsupported|not supported|missing|Missing|does not exist|doesn't exist|not exist|Killed|killed|"
    r"out of memory|Out of memory|OOM|no space left|timed out|timeout|Timeout|BackOff|Evicted|mismatch|conflict|"
    r"incompatible|Incompatible|not allowed|forbidden|Forbidden|Unauthorized|unauthorized|segmentation|Segmentation|"
    r"aborted|Aborted|corrupt|unexpected|Unexpected|unrecognized|Unrecognized|requires|required|deprecated|"
    r"too many|too long|not defined|does not match|doesn't match|only supports|can only|returned \d{3}\b|HTTP [45]\d\d\b|"
    r"checking for .*\.\.\. (?:-+ )?no$|[Nn]o module named|not installed"
)
_WARNING = re.compile(
    r"^(?:WARNING|Warning|warning|WARN|warn|npm WARN|DeprecationWarning|\S+ WARN)\b"
    r"|^(?:error )?code E[A-Z0-9]+$"
)  # npm's `code EACCES` line: a label, the message follows
_WARNING_INSIDE = re.compile(r"\b(?:[A-Z]\w*Warning|[Ww]arning|WARN(?:ING)?)\b:")  # file:line: UserWarning: ...

# Wrapper lines: a tool saying that something below it failed, naming no cause. They are kept
# (a log holding nothing else is still searched by them) but rank after every cause.
_WRAPPER = re.compile(
    r"did not complete successfully|Process completed with exit code|[Ee]xited with (?:exit )?(?:code|status)"
    r"|returned a non-zero code|non-zero exit (?:status|code)|exit status \d+\s*$|[Ee]xit code:? \d+\s*$"
    r"|failed with exit code \d+|^make(?:\[\d+\])?: \*\*\* .*Error \d+|: recipe for target .+ failed\s*$"
    r"|^(?:A complete log|Log files|code ELIFECYCLE|errno \d|Exit status|Failed at the|This is probably not a problem"
    r"|command failed|If you need help, you may report)"
    r"|^error Command failed with exit code|subprocess-exited-with-error|metadata-generation-failed"
    r"|This error originates from a subprocess|Encountered error while|^× |^╰─>|^FAILURE: Build failed"
    r"|^BUILD FAILED|^Build FAILED|^error: could not compile|^error: failed to compile|Job failed|^ERROR: Job failed"
    r"|^error: failed to run custom build command|^=+ .*\b(?:failed|passed|error|errors)\b.* in [\d.]+s"
    r"|short test summary info|^Interrupted: \d+ error"
    r"|^!+ .* !+$|^\*\* BUILD FAILED|^\d+ (?:Warning|Error)\(s\)|^Error: Process completed|^Command failed:"
    r"|^ELIFECYCLE|^(?:\[ERROR\] )?(?:-> \[Help|Re-run Maven|For more information|To see the full stack)"
    r"|^(?:ERROR: )?failed to solve: process .* did not complete|^ERROR (?:collecting )?\S+$"
    r"|Lifecycle(?:Execution)?Exception|MojoExecutionException|MojoFailureException"
    r"|^Execution failed for task|^Could not resolve all (?:files|dependencies|artifacts) for|^A problem occurred"
    r"|^fatal: Could not read from remote repository|^Please make sure you have the correct access rights"
    r"|^error: failed to push some refs|^ERROR: Encountered errors while bringing up|chart\(s\) linted"
    r"|Failed to build gem native extension|and Bundler cannot continue|extconf\.rb failed|^Error installing \S+:$"
    r"|Your requirements could not be resolved to an installable set|^Module build failed"
    r"|^(?:Warning: )?Docker build failed with exit code|^(?:build|configure) error$|^not ok$"
)
_SIGNAL_EXIT = re.compile(r"\b(?:code|status)\b\D{0,3}\b(?:126|127|134|137|139|143)\b|\((?:126|127|134|137|139|143)\)")
# Lines that are never the error: frames, excerpts, carets, hints, separators, progress.
_NOISE = re.compile(
    r"^(?:at |File \"|File ~|File \S+:\d+, in |Cell In\[|Traceback \(most recent call last\)|\^|~|-->|\||=+$|-+$|_+|help:|note:|hint:|"
    r"\S+:\d+: in \S+$|[=_-]{3,} .* [=_-]{3,}$|goroutine |\d+ \||-*> ?\d+ |\d+\s{2,}|\.\.\. \d+ more|in <module>|"
    r"#\d+ \[|#\d+ (?:DONE|CACHED|sha256)|raise \w|NB:|\w+: '.*',?$|"
    r"error (?:Darwin|Linux|Windows_NT|argv|node\s+v|npm\s+v|cwd|code$)|error: (?:Trace|See http)|[#\w-]*error[#\w-]*$|"
    r"(?:System|command|cwd|node -v|node-gyp -v) |"
    r"Traceback:$|\* Try:|\* Get more help|Run with --|BUILD SUCCESSFUL|Downloading|Collecting|Requirement already)"
)
# A line whose next non-wrapper line is the cause: Gradle's `* What went wrong:`, webpack's
# `ERROR in <file>`, npm's `Could not resolve dependency:`, an exception named alone on its line
# (Laravel's Collision), a Rust panic whose message starts on the next line.
_CAUSE_FOLLOWS = re.compile(
    r"^\* What went wrong:|^What went wrong:|^ERROR in \S|^Could not resolve dependency:$"
    r"|^(?:[A-Z]\w*\\)*[A-Z]\w*(?:Exception|Error)$|panicked at '$"
)
# pytest's one-line summaries carry the exception after ' - ': 'FAILED t.py::test - KeyError: 1'.
_PYTEST_SUMMARY = re.compile(r"^(?:FAILED|ERROR) \S+ - (.+)$")
# What a sentence never holds and tool output often does: a path, a URL, a quoted value, an id.
_VALUE_PLACEHOLDER = re.compile(r"<(?:path|url|\*|hex|addr|uuid|ts|ip)>")
# Substrings, lowercase, of every line a cause or wrapper pattern can match: long input is
# prefiltered with them (plain `str.find`, no regex) before any line is judged.
KEYWORDS = (
    "err",
    "fail",
    "fatal",
    "panic",
    "exception",
    "denied",
    "refused",
    "not found",
    "cannot",
    "can't",
    "could not",
    "couldn't",
    "unable",
    "no such",
    "invalid",
    "undefined",
    "missing",
    "exist",
    "killed",
    "out of memory",
    "no space",
    "timed out",
    "timeout",
    "backoff",
    "evicted",
    "unsupported",
    "not supported",
    "exit code",
    "exit status",
    "caused by",
    "went wrong",
    "warn",
    "traceback",
    "mismatch",
    "conflict",
    "forbidden",
    "unauthorized",
    "segmentation",
    "abort",
    "unexpected",
    "unrecognized",
    "incompatible",
    "not allowed",
    "requires",
    "required",
    "corrupt",
    "oom",
    "fault",
    "too many",
    "not defined",
    "does not match",
    "only supports",
    "can only",
    "returned",
    "http ",
    "checking for",
    "panicked",
    "too long",
    "too open",
    "not installed",
    "host identification",
    "no module",
)


@dataclass(frozen=True)
class OutputLine:
    """One judged line of pasted output."""

    text: str  # without transport prefixes
    position: int  # index among the input's lines
    rank: int  # EXCEPTION (most decisive) .. CONTEXT


class _Judged(NamedTuple):
    """One line as `scan` judged it; the fields' order is the sort order: strongest rank first,
    then the line that wins within a rank."""

    rank: int
    order: int  # the position, negated where the last line of a rank wins (traceback exceptions)
    position: int
    text: str


@dataclass(frozen=True)
class Scan:
    """What a pasted text holds: its decisive lines and the lines around them."""

    decisive: tuple[OutputLine, ...]  # strongest first, at most DECISIVE_LIMIT
    nearby: tuple[str, ...]  # prefix-stripped lines next to the decisive ones, and other keyword lines
    line_count: int
    is_output: bool  # tool output (ranked, never gated), not a sentence

    @property
    def lines(self) -> list[str]:
        return [line.text for line in self.decisive]

    @property
    def has_cause(self) -> bool:
        return any(line.rank < WRAPPER for line in self.decisive)


def strip_prefixes(line: str) -> str:
    """The line without terminal escapes and transport prefixes (timestamps, step ids, ...)."""
    if "\x1b" in line or "[" in line:
        line = _ANSI.sub("", line)
    line = _PREFIX.sub("", line[:MAX_LINE_CHARS]).strip()
    if len(line) > 2 and line[0] == line[-1] == "`" and "`" not in line[1:-1]:
        line = line[1:-1].strip()  # an error quoted as inline code in an issue or a chat
    return line


@lru_cache(maxsize=8192)
def judge(text: str) -> int:
    """The rank of one prefix-stripped line: EXCEPTION .. WARNING, WRAPPER or CONTEXT."""
    if not text:
        return CONTEXT
    if _WRAPPER.search(text):
        # An exit code past 125 is itself a cause: not executable, not found, killed, crashed, terminated.
        return PHRASE if _SIGNAL_EXIT.search(text) else WRAPPER
    if _NOISE.match(text) and not _EXCEPTION.match(text):
        return CONTEXT
    if _EXCEPTION.search(text):
        return EXCEPTION
    if _WARNING.match(text):
        return WARNING
    if _ERROR.search(text):
        return WARNING if _WARNING_INSIDE.search(text) and "rror" not in text else ERROR
    if _PHRASE.search(text):
        return PHRASE
    return CONTEXT


def _keyword_positions(text: str, lines: list[str]) -> list[int]:
    """Indexes of the lines holding an error keyword, for input too long to judge line by line."""
    lowered = text.lower()
    starts = [0]
    for line in lines[:-1]:  # offsets of line starts in `text` (splitlines drops the separators)
        starts.append(starts[-1] + len(line) + 1)
    hits: set[int] = set()
    for keyword in KEYWORDS:
        at = lowered.find(keyword)
        found = 0
        while at != -1 and found < 4 * KEYWORD_LINES:
            index = bisect.bisect_right(starts, at) - 1
            hits.add(index)
            found += 1
            at = lowered.find(keyword, starts[index + 1] if index + 1 < len(starts) else len(lowered))
    ordered = sorted(hits)
    if len(ordered) > KEYWORD_LINES:
        head = KEYWORD_LINES // 3
        ordered = ordered[:head] + ordered[-(KEYWORD_LINES - head) :]
    return ordered


def scan(text: str, limit: int = DECISIVE_LIMIT) -> Scan:
    """Judge the lines of `text` and pick its decisive lines, strongest first.

    Within a rank the first line wins (a compiler's first error is the one to fix), except
    the exceptions of a Python traceback and a Java `Caused by:` chain, where the last one
    is the root (Python prints the raised exception last; Java the deepest cause last).
    """
    raw_lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    positions: Sequence[int]
    if len(raw_lines) > FULL_SCAN_LINES:
        positions = _keyword_positions("\n".join(raw_lines), raw_lines)
    else:
        positions = range(len(raw_lines))
    stripped: dict[int, str] = {}
    judged: list[_Judged] = []
    traceback = "Traceback (most recent call last)" in text or "Caused by:" in text
    cause_next = False
    for position in positions:
        line = strip_prefixes(raw_lines[position])
        stripped[position] = line
        if not line:
            continue
        if _CAUSE_FOLLOWS.search(line):
            cause_next = True
            continue
        summary = _PYTEST_SUMMARY.match(line)
        if summary:
            line = summary.group(1)
        rank = judge(line)
        if rank in (PHRASE, CONTEXT) and _ERROR_LEVEL.match(raw_lines[position]):
            rank = ERROR  # the tool marked it an error line
        if cause_next and rank != WRAPPER:
            rank, cause_next = min(rank, ERROR), False
        order = -position if traceback and rank == EXCEPTION else position
        judged.append(_Judged(rank, order, position, line))
    judged.sort()
    chosen: list[OutputLine] = []
    seen: set[str] = set()
    for judgement in judged:
        if judgement.rank == CONTEXT or judgement.text in seen:
            continue
        seen.add(judgement.text)
        chosen.append(OutputLine(judgement.text, judgement.position, judgement.rank))
        if len(chosen) == limit:
            break
    if not chosen:
        # Nothing looks like an error: the last lines that are not frames or excerpts.
        plain = [(p, line) for p, line in stripped.items() if line and not _NOISE.match(line)]
        plain = plain or [(p, line) for p, line in stripped.items() if line]
        chosen = [OutputLine(line, p, CONTEXT) for p, line in plain[-limit:][::-1]]
    near = {p for line in chosen for p in (line.position - 1, line.position + 1)}
    nearby = tuple(
        dict.fromkeys(stripped.get(p) or strip_prefixes(raw_lines[p]) for p in sorted(near) if 0 <= p < len(raw_lines))
    )
    nonempty = sum(1 for p in stripped.values() if p)
    is_output = (
        any(line.rank in (EXCEPTION, ERROR, WRAPPER) for line in chosen)
        or (nonempty > 1 and any(line.rank < CONTEXT for line in chosen))
        or bool(chosen and _VALUE_PLACEHOLDER.search(normalize_signature(chosen[0].text)))
    )
    return Scan(tuple(chosen), tuple(n for n in nearby if n and n not in seen), len(raw_lines), is_output)


def decisive_lines(text: str, limit: int = DECISIVE_LIMIT) -> list[str]:
    """The decisive lines of `text`, strongest first (a single line comes back as it is, stripped)."""
    return scan(text, limit).lines
