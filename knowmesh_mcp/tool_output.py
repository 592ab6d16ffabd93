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
from dataclasses import dataclass
from functools import lru_cache

from .normalize import normalize_signature

# Line ranks: lower is more decisive. Causes take 0..3; wrappers and unknown lines come after.
EXCEPTION, ERROR, PHRASE, WARNING, WRAPPER, CONTEXT = range(6)
DECISIVE_LIMIT = 6  # decisive lines kept: each is hashed and its terms searched
FULL_SCAN_LINES = 4000  # below this many lines every line is judged
KEYWORD_LINES = 600  # past it, at most this many keyword lines (the first third, the last two thirds)
MAX_LINE_CHARS = 2000  # a longer line is judged by its first MAX_LINE_CHARS characters

# Terminal escapes (CSI, OSC, two-byte) and SGR codes whose ESC byte was lost on the way.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]|(?:\^\[)?\[\d+(?:;\d+)*m")

# Transport prefixes, applied repeatedly at the start of a line: they say when and where a line
# was printed, never what went wrong.
_PREFIX = re.compile(
    r"""^(?:
        \s+
      | \#\#\[[a-z]+\]                                  # GitHub Actions: ##[error] ##[group]
      | ::(?:error|warning|notice|debug)[^:\n]*::       # workflow commands: ::error file=x::
      | \[?\d{4}[-/]\d\d[-/]\d\d(?:[T\s]\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?)?(?:Z|\s?[+-]\d\d:?\d\d|\s?UTC)?\]?:?(?=\s)  # ISO / Go log time
      | \[?\d\d:\d\d:\d\d(?:[.,]\d+)?\]?(?=\s)           # time of day: 10:00:01.123
      | \#\d+\s(?:\d+\.\d+\s)?                           # BuildKit: '#12 0.915 '
      | (?:app|heroku)\[[\w.-]+\]:(?=\s)                  # Heroku: app[web.1]:
      | [A-Za-z][\w.-]*\s+\|(?=\s|$)                     # compose: 'web-1  | '
      | [E>](?=\s{2,}\S)                                 # pytest: 'E   ' and '>   ' columns
      | >(?=\s|$)                                        # quoting
      | \[(?:INFO|DEBUG|TRACE|WARN|WARNING|ERROR|ERR|FATAL|SEVERE|CRITICAL|stderr|stdout)\](?=\s)  # log levels in brackets
      | (?:stderr|stdout|remote):(?=\s)                  # stream names
    )+""",
    re.VERBOSE,
)

# Cause lines, by rank. Each pattern is searched in the line without its prefixes.
_EXCEPTION = re.compile(
    r"^(?:Caused by:\s*|Exception in thread \"[^\"]*\"\s*|Uncaught\s+|Unhandled\s+(?:exception|rejection):?\s*)?"
    r"(?:[\w$]+[.:]{1,2})*(?:[A-Z]\w*)?(?:Error|Exception|Exit|Failure|Fault|Interrupt|Panic|Warning)\b(?::|$)"
    r"|^(?:panic|fatal error|thread '[^']*' panicked at)\b"
    r"|^(?:\S+\s*:\s*)?(?:error|warning)\s*\[?[A-Z]{1,6}\d{3,5}\]?:"  # error[E0382]: error TS2307: error NU1101: CS0246
    r"|^npm (?:ERR!|error) (?:code|errno) [A-Z]"
    r"|^(?:Error|error): [A-Z][A-Z_]{3,}\b"  # Error: EACCES ..., Error: ENOENT
)
_ERROR = re.compile(
    r"^(?:[Ee]rror|[Ff]atal|panic|failure|critical)(?:\[\w+\])?\s*:"  # git fatal:, rustc error:, cargo
    r"|^(?:ERROR|FATAL|PANIC)\b"  # postgres ERROR:  ..., ERROR ...
    r"|^\S+:\d+:(?:\d+:)?\s"  # file:line[:col]: message (go build, gcc, eslint, make)
    r"|^\S+\(\d+,\d+\):\s"  # tsc, MSBuild file(line,col): message
    r"|^Error from server\b|^Error response from daemon\b"
    r"|^[\w./@+-]+:\s+(?:[\w./-]+:\s+)?(?:line \d+:\s+)?\S.*"  # tool: message (bash: x: command not found, sed: 1: ...)
    r"(?:not found|denied|refused|invalid|No such|cannot|can't|unable|failed|error|unknown|missing|not a|does not)"
)
_PHRASE = re.compile(
    r"error|Error|ERROR|fail|FAIL|cannot|can't|Cannot|unable|Unable|could not|Could not|couldn't|"
    r"No such file|not found|Not found|NOT FOUND|denied|Denied|refused|undefined|Undefined|invalid|Invalid|"
    r"unsupported|Unsupported|not supported|missing|Missing|does not exist|doesn't exist|not exist|Killed|killed|"
    r"out of memory|Out of memory|OOM|no space left|timed out|timeout|Timeout|BackOff|Evicted|mismatch|conflict|"
    r"incompatible|Incompatible|not allowed|forbidden|Forbidden|Unauthorized|unauthorized|segmentation|Segmentation|"
    r"aborted|Aborted|corrupt|unexpected|Unexpected|unrecognized|Unrecognized|requires|required|deprecated"
)
_WARNING = re.compile(r"^(?:WARNING|Warning|warning|WARN|warn|npm WARN|DeprecationWarning)\b")

# Wrapper lines: a tool saying that something below it failed, naming no cause. They are kept
# (a log holding nothing else is still searched by them) but rank after every cause.
_WRAPPER = re.compile(
    r"did not complete successfully|Process completed with exit code|[Ee]xited with (?:exit )?(?:code|status)"
    r"|returned a non-zero code|non-zero exit (?:status|code)|exit status \d+\s*$|[Ee]xit code:? \d+\s*$"
    r"|^make(?:\[\d+\])?: \*\*\* .*Error \d+|^npm (?:ERR!|error) (?:A complete log|Log files|code ELIFECYCLE|errno \d"
    r"|Exit status|Failed at the|This is probably not a problem|command failed|\s*$)"
    r"|error Command failed with exit code|subprocess-exited-with-error|metadata-generation-failed"
    r"|This error originates from a subprocess|Encountered error while|^× |^╰─>|^FAILURE: Build failed"
    r"|^BUILD FAILED|^Build FAILED|^error: could not compile|Job failed|^ERROR: Job failed"
    r"|^=+ .*\b(?:failed|passed|error|errors)\b.* in [\d.]+s|short test summary info|^Interrupted: \d+ error"
    r"|^!+ .* !+$|^\*\* BUILD FAILED|^\d+ (?:Warning|Error)\(s\)|^Error: Process completed|^Command failed:"
    r"|^ERROR (?:collecting )?\S+$|^ELIFECYCLE|^\[ERROR\] (?:-> \[Help|Re-run Maven|For more information|To see the full stack)"
    r"|^(?:ERROR: )?failed to solve: process .* did not complete"
)
# Lines that are never the error: frames, excerpts, carets, hints, separators, progress.
_NOISE = re.compile(
    r"^(?:at |File \"|File ~|Cell In\[|Traceback \(most recent call last\)|\^|~|-->|\||=+$|-+$|_+|help:|note:|hint:|"
    r"^\S+:\d+: in \S+$|^[=_-]{3,} .* [=_-]{3,}$|goroutine |\d+ \||-*> ?\d+ |\d+\s{2,}|\.\.\. \d+ more|in <module>|#\d+ \[|#\d+ (?:DONE|CACHED|sha256)|"
    r"Traceback:$|\* Try:|\* Get more help|Run with --|BUILD SUCCESSFUL|Downloading|Collecting|Requirement already)"
)
# What a sentence never holds and tool output often does: a path, a URL, a quoted value, an id.
_VALUE_PLACEHOLDER = re.compile(r"<(?:path|url|\*|hex|addr|uuid|ts|ip)>")
# A header whose next line is the cause (Gradle's `* What went wrong:`, Python's chains).
_CAUSE_FOLLOWS = re.compile(r"^\* What went wrong:|^What went wrong:")
# pytest's one-line summaries carry the exception after ' - ': 'FAILED t.py::test - KeyError: 1'.
_PYTEST_SUMMARY = re.compile(r"^(?:FAILED|ERROR) \S+ - (.+)$")
# Substrings, lowercase, of every line a cause or wrapper pattern can match: long input is
# prefiltered with them (plain `str.find`, no regex) before any line is judged.
KEYWORDS = ("err", "fail", "fatal", "panic", "exception", "denied", "refused", "not found", "cannot", "can't",
            "could not", "couldn't", "unable", "no such", "invalid", "undefined", "missing", "exist", "killed",
            "out of memory", "no space", "timed out", "timeout", "backoff", "evicted", "unsupported", "not supported",
            "exit code", "exit status", "caused by", "went wrong", "warn", "traceback", "mismatch", "conflict",
            "forbidden", "unauthorized", "segmentation", "abort", "unexpected", "unrecognized", "incompatible",
            "not allowed", "requires", "required", "corrupt", "oom", "fault")


@dataclass(frozen=True)
class OutputLine:
    """One judged line of pasted output."""

    text: str  # without transport prefixes
    position: int  # index among the input's lines
    rank: int  # EXCEPTION (most decisive) .. CONTEXT


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
    return _PREFIX.sub("", line[:MAX_LINE_CHARS]).strip()


@lru_cache(maxsize=8192)
def judge(text: str) -> int:
    """The rank of one prefix-stripped line: EXCEPTION .. WARNING, WRAPPER or CONTEXT."""
    if not text:
        return CONTEXT
    if _WRAPPER.search(text):
        return WRAPPER
    if _NOISE.match(text) and not _EXCEPTION.match(text):
        return CONTEXT
    if _EXCEPTION.search(text):
        return EXCEPTION
    if _WARNING.match(text):
        return WARNING
    if _ERROR.search(text):
        return ERROR
    if _PHRASE.search(text):
        return PHRASE
    return CONTEXT


def looks_like_output(text: str) -> bool:
    """True when one line has the shape of tool output rather than of a sentence."""
    return judge(strip_prefixes(text)) in (EXCEPTION, ERROR, WRAPPER)


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
            line = bisect.bisect_right(starts, at) - 1
            hits.add(line)
            found += 1
            at = lowered.find(keyword, starts[line + 1] if line + 1 < len(starts) else len(lowered))
    ordered = sorted(hits)
    if len(ordered) > KEYWORD_LINES:
        head = KEYWORD_LINES // 3
        ordered = ordered[:head] + ordered[-(KEYWORD_LINES - head):]
    return ordered


def scan(text: str, limit: int = DECISIVE_LIMIT) -> Scan:
    """Judge the lines of `text` and pick its decisive lines, strongest first.

    Within a rank the first line wins (a compiler's first error is the one to fix), except
    the exceptions of a Python traceback and a Java `Caused by:` chain, where the last one
    is the root (Python prints the raised exception last; Java the deepest cause last).
    """
    raw_lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if len(raw_lines) > FULL_SCAN_LINES:
        positions = _keyword_positions("\n".join(raw_lines), raw_lines)
    else:
        positions = range(len(raw_lines))
    stripped: dict[int, str] = {}
    judged: list[tuple[int, int, int, str]] = []  # (rank, order, position, text)
    traceback = "Traceback (most recent call last)" in text or "Caused by:" in text
    cause_next = False
    for position in positions:
        line = strip_prefixes(raw_lines[position])
        stripped[position] = line
        if not line:
            continue
        if _CAUSE_FOLLOWS.match(line):
            cause_next = True
            continue
        summary = _PYTEST_SUMMARY.match(line)
        if summary:
            line = summary.group(1)
        rank = judge(line)
        if cause_next:
            rank, cause_next = min(rank, ERROR), False
        order = -position if traceback and rank == EXCEPTION else position
        judged.append((rank, order, position, line))
    judged.sort()
    chosen: list[OutputLine] = []
    seen: set[str] = set()
    for rank, _, position, line in judged:
        if rank == CONTEXT or line in seen:
            continue
        seen.add(line)
        chosen.append(OutputLine(line, position, rank))
        if len(chosen) == limit:
            break
    if not chosen:
        # Nothing looks like an error: the last lines that are not frames or excerpts.
        plain = [(p, line) for p, line in stripped.items() if line and not _NOISE.match(line)]
        plain = plain or [(p, line) for p, line in stripped.items() if line]
        chosen = [OutputLine(line, p, CONTEXT) for p, line in plain[-limit:][::-1]]
    near = {p for line in chosen for p in (line.position - 1, line.position + 1)}
    nearby = tuple(dict.fromkeys(
        stripped.get(p) or strip_prefixes(raw_lines[p]) for p in sorted(near) if 0 <= p < len(raw_lines)
    ))
    nonempty = sum(1 for p in stripped.values() if p)
    is_output = (any(line.rank in (EXCEPTION, ERROR, WRAPPER) for line in chosen)
                 or (nonempty > 1 and any(line.rank < CONTEXT for line in chosen))
                 or bool(_VALUE_PLACEHOLDER.search(normalize_signature(chosen[0].text))))
    return Scan(tuple(chosen), tuple(n for n in nearby if n and n not in seen), len(raw_lines), is_output)


def decisive_lines(text: str, limit: int = DECISIVE_LIMIT) -> list[str]:
    """The decisive lines of `text`, strongest first (a single line comes back as it is, stripped)."""
    return scan(text, limit).lines
