"""Ecosystem names and error-signature normalization.

Signature hashes are the strongest retrieval signal: two occurrences of one error that
differ only in paths, versions, numbers, addresses, quoted values or timestamps must
normalize to the same text. The stored hashes are derived data, so NORMALIZER_VERSION
must be bumped whenever the output of `normalize_signature` changes; a migration then
recomputes every stored hash (see docs/decisions.md).

This module depends on nothing else in the package.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

NORMALIZER_VERSION = 3

ECOSYSTEM_ALIASES: dict[str, str] = {
    "py": "python",
    "js": "node",
    "javascript": "node",
    "nodejs": "node",
    "ts": "typescript",
    "golang": "go",
    "csharp": "dotnet",
    "c#": "dotnet",
    ".net": "dotnet",
    "postgresql": "postgres",
    "pg": "postgres",
    "bash": "shell",
    "sh": "shell",
    "cxx": "cpp",
    "c++": "cpp",
}


def canonical_ecosystem(name: str) -> str:
    """Fold an ecosystem name or alias to its canonical category (open-ended: unknown names pass)."""
    folded = name.strip().lower()
    return ECOSYSTEM_ALIASES.get(folded, folded)


# --- Normalization rules -----------------------------------------------------------------
# Defined in the order `normalize_signature` applies them; each runs on the output of the ones
# before it, and the order matters:
#  1. terminal escapes go first (they contain digits, letters and `[`), before lowercasing;
#  2. lowercase, ESC-less colour codes, CRLF, control characters;
#  3. quoted values, before anything that could eat a quote character and before a lone CR
#     becomes a line break;
#  4. underlines, then the sed special case;
#  5. URLs before paths (they contain slashes), Windows paths before POSIX ones;
#  6. paths before timestamps, ids and numbers, so a path holding a date, a SHA or a version
#     is one <path>;
#  7. timestamps, UUIDs, IPv4 addresses before hex ids and versions (which they contain or
#     resemble), hex before versions, versions before plain numbers.
# Invariants that keep the whole idempotent (normalizing twice changes nothing):
# - a placeholder is `<`, lowercase letters or `*`, `>`: no digit, uppercase letter, quote or
#   space, and no rule matches inside one;
# - after step 3 no rule adds or removes a quote character (paths and URLs exclude them);
# - a rule that refuses to start right after a word character also refuses to start after `>`,
#   and one that refuses to end before a word character also refuses to end before `<`: a word
#   character next to a match may itself become a placeholder;
# - rules that look at whitespace accept any run of it (`[^\S\n]+`), as the final collapse does.
# Performance: every repeated character class is anchored by a lookbehind that excludes that
# same class, so a long run is scanned from one start only (no catastrophic backtracking).

# Terminal escapes: CSI (colours, cursor moves), OSC (titles, hyperlinks) and two-byte escapes.
# Runs before lowercasing because final bytes are case-sensitive (`\x1b[2K`, `\x1bM`).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]")
# SGR colour codes whose ESC byte was lost on the way (CI logs pasted into issues), or shown
# in caret notation: `[31m`, `[1;31m`, `^[[0m`. Digits are required, so `x[m]` survives.
_ANSI_REMNANT = re.compile(r"(?:\^\[)?\[\d+(?:;\d+)*m")
# Control characters other than tab, LF and CR (kept for now, see below), C1 controls, and
# invisible format characters (zero-width spaces, BOM) become spaces.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2060\ufeff]")
# Quoted values: the missing module, the key, the user, a path with spaces. A single quote
# opens only after a non-word character (or a `b`/`u` repr prefix) and closes only before one,
# so the apostrophes of "can't" and "it's" are not quotes. `x' is GNU quoting (bash: unexpected
# token `fi'). A value may hold a CR (the `‘bash\r’` of a CRLF script), never an LF.
# A value never holds an opening quote character (" ` ‘ “) nor, inside '...', any quote
# character; an apostrophe is fine inside the other kinds ("can't", `'static`). So each attempt
# stops at the first quote character it meets: linear, and a second pass pairs them the same.
_QUOTED = re.compile(
    r"(?:(?<![\w>])|(?<=[bu])(?<![\w>][bu]))'[^'\"`‘’“”\n]*'(?![\w<])"
    r"|\"[^\"`‘“\n]*\""
    r"|`[^\"`‘“\n]*`"
    r"|`[^'\"`‘“\n]*'"
    r"|‘[^\"`‘’“\n]*’"
    r"|“[^\"`‘“”\n]*”"
)
# Bare values: names some tools print without quotes where others quote them (the command a
# shell did not find, the identifier Go calls undefined, the class Java could not load). They
# are values like quoted ones: replaced by '<*>' and reported by `quoted_values`. A name is a run
# of non-space characters without quotes, colons or placeholder brackets, so a quoted value
# (`$'\r': command not found`, the CRLF node) is never taken for one.
_NAME = r"[^\s'\"`‘’“”<>:,;()]*[^\s'\"`‘’“”<>:,;().]"  # a sentence's final full stop is not part of it
# Each rule with a literal its match cannot do without: the rule only runs where it appears (speed only).
_BARE_VALUES = (
    (
        "not found",
        re.compile(rf"(?<=: )(?P<v>{_NAME})(?=: (?:command )?not found$)", re.MULTILINE),
    ),  # bash x: command not found
    (
        "command not found: ",
        re.compile(rf"(?<=command not found: )(?P<v>{_NAME})(?=$)", re.MULTILINE),
    ),  # zsh: command not found: x
    (
        "unknown command: ",
        re.compile(rf"(?<=unknown command: )(?P<v>{_NAME})(?=$)", re.MULTILINE),
    ),  # fish: Unknown command: x
    ("undefined: ", re.compile(r"(?<=\bundefined: )(?P<v>[\w.$]+)(?![\w.$'\"`])")),  # go: undefined: x
    (
        "declared and not used: ",
        re.compile(r"(?<=declared and not used: )(?P<v>\w+)(?!\w)"),
    ),  # go 1.20+: declared and not used: x
    (
        " declared ",
        re.compile(r"(?<![\w'\"`])(?P<v>\w+)(?= declared (?:and|but) not used\b)"),
    ),  # go < 1.20: x declared and not used
    (
        "main class ",
        re.compile(r"(?<=\bmain class )(?P<v>[\w.$/-]+)(?![\w.$/-])"),
    ),  # java: could not find or load main class x
    (
        " does not exist",
        re.compile(r"(?<=\bpackage )(?P<v>[\w.]+)(?= does not exist\b)"),
    ),  # javac: package x does not exist
    (
        "could not find ",
        re.compile(r"(?<=\bcould not find )(?P<v>[\w.-]+:[\w.-]+(?::[\w.-]*\w)+)"),
    ),  # gradle coordinates
    (
        "could not find artifact ",
        re.compile(r"(?<=\bcould not find artifact )(?P<v>[\w.-]+:[\w.-]+(?::[\w.-]*\w)+)"),
    ),  # maven coordinates
    (
        "classnotfoundexception: ",
        re.compile(r"(?<=\bclassnotfoundexception: )(?P<v>[\w.$/]+)(?![\w.$/])"),
    ),  # java classes
    ("noclassdeffounderror: ", re.compile(r"(?<=\bnoclassdeffounderror: )(?P<v>[\w.$/]+)(?![\w.$/])")),
    (
        "no module named ",
        re.compile(r"(?<=\bno module named )(?P<v>[a-z_][\w.]*)(?![\w.'\"`])"),
    ),  # python 2: no module named x
    (
        "no matching distribution found for ",
        re.compile(rf"(?<=\bno matching distribution found for )(?P<v>{_NAME})"),
    ),  # pip
    (
        "satisfies the requirement ",
        re.compile(rf"(?<=\bsatisfies the requirement )(?P<v>{_NAME})"),
    ),  # pip: could not find a version that ...
    ("src refspec ", re.compile(rf"(?<=\bsrc refspec )(?P<v>{_NAME})(?= does not match any)")),  # git push
    ("couldn't find remote ref ", re.compile(rf"(?<=\bcouldn't find remote ref )(?P<v>{_NAME})")),  # git pull
    ("could not resolve host: ", re.compile(rf"(?<=\bcould not resolve host: )(?P<v>{_NAME})")),  # git, curl
    ("manifest for ", re.compile(rf"(?<=\bmanifest for )(?P<v>{_NAME}(?::{_NAME})?)(?= not found)")),  # docker pull
    ("pull access denied for ", re.compile(r"(?<=\bpull access denied for )(?P<v>[^\s'\"`‘’“”<>:,]+)")),  # docker pull
    ("no such image: ", re.compile(rf"(?<=\bno such image: )(?P<v>{_NAME}(?::{_NAME})?)")),  # docker
    ("no such container: ", re.compile(rf"(?<=\bno such container: )(?P<v>{_NAME})")),
    (
        "on endpoint ",
        re.compile(rf"(?<=\bon endpoint )(?P<v>{_NAME})(?= \()"),
    ),  # docker: ... connectivity on endpoint web (3c9e…)
    (
        "no required module provides package ",
        re.compile(rf"(?<=\bno required module provides package )(?P<v>{_NAME})"),
    ),  # go
    (" is not in ", re.compile(r"(?<=\bpackage )(?P<v>[\w./-]+)(?= is not in (?:goroot|std)\b)")),  # go
    ("cannot load such file -- ", re.compile(rf"(?<=\bcannot load such file -- )(?P<v>{_NAME})")),  # ruby
    ("call to undefined function ", re.compile(r"(?<=\bcall to undefined function )(?P<v>[\w\\]+)(?=\(\))")),  # php
    (
        ": no such file or directory",
        re.compile(rf"(?<=\benv: )(?P<v>{_NAME})(?=: no such file or directory)"),
    ),  # env: python: No such file ...
    (
        "the script ",
        re.compile(r"(?<=\bthe script )(?P<v>[^\s'\"`<>:]+)(?= is installed in)"),
    ),  # pip: the script x is installed in
    (
        " installed in",
        re.compile(
            r"(?<=\bthe scripts )(?P<v>[^\s'\"`<>:]+(?:, [^\s'\"`<>:]+)*(?: and [^\s'\"`<>:]+)?)(?= (?:is|are) installed in)"
        ),
    ),  # pip
)
# Shells word "command not found" differently; one canonical form makes them one signature:
# `bash: x: …`, `./run.sh: line 3: x: …`, `sh: 1: x: not found`, `zsh: command not found: x`.
_SHELL_NOT_FOUND = re.compile(
    r"^(?:[^\s'\"`:]+: )*(?:line <n>: )?'<\*>': (?:command )?not found$"
    r"|^(?:[^\s'\"`:]+: )?(?:command not found|unknown command): '<\*>'$",
    re.MULTILINE,
)


def _replace_bare(text: str) -> str:
    for literal, rule in _BARE_VALUES:
        if literal in text:
            text = rule.sub("'<*>'", text)
    return text


# Caret and tilde underlines (Python 3.11+, Rust) whose length follows the value above them.
_CARETS = re.compile(r"[\^~]{2,}")
# Rust's dash underlines (`-----`), standing alone between spaces.
_DASHES = re.compile(r"(?<!\S)-{2,}(?!\S)")
# BSD sed echoes the first character of a file name mistaken for its script
# (`sed: 1: "file.txt": invalid command code f`): that character is a value.
_SED_COMMAND_CODE = re.compile(r"(invalid command code[^\S\n]+)[^\s<'\"`‘’“”]")
# URLs (before paths: they contain slashes). A trailing sentence mark is not part of one.
_URL = re.compile(r"(?<![\w+.>-])[a-z][\w+.-]*://[^\s'\"`‘’“”<>]*[^\s'\"`‘’“”<>.,;:!?)\]}]")
# Windows paths: a drive (`c:\`, `c:/`) or a UNC root (`\\server\`), then folders; a folder
# may contain single spaces (`Program Files`) when a backslash follows it.
_WIN_CHAR = r"[^\s'\"`‘’“”<>|?*:,;()\\/]"
_WINDOWS_PATH = re.compile(
    rf"(?<![\w\\>])(?:[a-z]:[\\/]|\\\\{_WIN_CHAR}+\\)"
    rf"(?:{_WIN_CHAR}+(?: {_WIN_CHAR}+)*\\|{_WIN_CHAR}+/)*{_WIN_CHAR}*"
)
# POSIX paths: absolute, `~/`, `./`, `../`; relative `dir/file.ext` (an extension starting
# with a letter, so `numpy/1.26.4` is not a path); and a bare `file.ext` followed by a line
# number (`main.rs:4:20`, `main.cpp(12)`), which also catches `host.name:443`.
_PATH_CHAR = r"[^\s'\"`‘’“”<>:,;()\[\]{}|]"
_PATH_START = r"(?<![\w.~@+<>/\\-])"
_POSIX_PATH = re.compile(
    rf"{_PATH_START}(?:~|\.{{1,2}})?/{_PATH_CHAR}+"
    rf"|{_PATH_START}(?:[\w.@+-]+/)+[\w.@+-]*\.[a-z][a-z0-9]{{0,4}}(?![\w<])"
    rf"|{_PATH_START}[\w.@+-]*\.[a-z][a-z0-9]{{0,4}}(?=[:(]\d)"
)
# Timestamps: ISO and Go-log dates with an optional time and zone; syslog, HTTP and ctime
# dates with a month name; and a bare time of day with seconds (`[10:11:12]`). A time of day
# must not touch a colon, so `file:10:11:12` stays a location.
_ZONE = r"(?:[^\S\n]?[ap]m)?(?:[^\S\n]?(?:z|utc|gmt|[+-]\d{2}:?\d{2}))?"
_CLOCK = rf"\d{{1,2}}:\d{{2}}:\d{{2}}(?:[.,]\d+)?{_ZONE}"
_WEEKDAY = r"(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*"
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_TIMESTAMP = re.compile(
    rf"(?<![\w:.>])\d{{4}}[-/]\d{{1,2}}[-/]\d{{1,2}}"
    rf"(?:(?:t|[^\S\n])\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?:[.,]\d+)?{_ZONE})?(?![\d:<])"
    rf"|(?<![\w:.>])(?:{_WEEKDAY},?[^\S\n]+)?(?:{_MONTH}[^\S\n]+\d{{1,2}}|\d{{1,2}}[^\S\n]+{_MONTH})"
    rf"(?:,?[^\S\n]+\d{{4}})?[^\S\n]+{_CLOCK}(?:[^\S\n]+\d{{4}})?(?![\w:<])"
    rf"|(?<![\w:.>]){_CLOCK}(?![\w:<])"
)
# UUIDs (before hex ids: each group is hex).
_UUID = re.compile(r"(?<![\w>-])[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![\w<])")
# IPv4 addresses (before versions, which they look like); a port stays a separate number.
_IPV4 = re.compile(r"(?<![\w.>])(?:\d{1,3}\.){3}\d{1,3}(?![\w<]|\.\d)")
# Memory addresses and Go frame offsets: 0x7ffd5b2c, +0x1d.
_HEX_ADDRESS = re.compile(r"(?<![\w>])0x[0-9a-f]+(?![\w<])")
# Git SHAs, container and image ids: 7+ hex characters with at least one digit and one letter
# (all-digit runs are numbers; all-letter runs like `deadbeef` or `accede` are words).
_LONG_HEX = re.compile(r"(?<![\w>])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}(?![\w<])")
# Versions: 1.2, v1.2.3, 3.11.4rc1, 1.0.0-beta.2, and python3.11 (a letter may precede).
# Two-part decimals (`12.5s`) are indistinguishable from versions and also become <ver>.
_VERSION = re.compile(r"(?:(?<![\w.>])v)?(?<![\d.])\d+(?:\.\d+){1,3}(?:[-+.]?[a-z0-9]+(?:\.\d+)*)?(?![\w<])")
# Every other number: line and column numbers (`line 3`, `:4:20`), ports, counts, sizes,
# lengths, pids; digits glued to a unit (`12ms`) too. Digits after a letter are part of a name
# or an error code (E0382, sha256, x86_64) and stay. HTTP status and process exit codes are the
# error's identity (404 vs 500, 137 = killed) and stay after "status code" / "exit code" /
# "exit status" (also docker's "exited with code 137" and "Exited (137)").
_NUMBER = re.compile(
    r"(\b(?:(?:status|exit)[^\S\n]+code|exit[^\S\n]+status|exited[^\S\n]+with[^\S\n]+code|exited[^\S\n]*\()"
    r"[^\S\n]*:?[^\S\n]*)?(?<!\w)\d+"
)
# Runs of horizontal whitespace (tabs, NBSP, Unicode spaces) become one space.
_SPACES = re.compile(r"[^\S\n]+")


def _replace_quoted(match: re.Match[str]) -> str:
    text = match.group(0)
    return text[0] + "<*>" + text[-1]


def _replace_number(match: re.Match[str]) -> str:
    return match.group(0) if match.group(1) else "<n>"


def _clean(text: str) -> str:
    """Remove terminal escapes and control characters, lowercase, and turn CRLF into LF."""
    text = _ANSI.sub("", text)
    text = text.lower()
    text = _ANSI_REMNANT.sub("", text)
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub(" ", text)


_DIGIT = re.compile(r"\d")


@lru_cache(maxsize=4096)  # pure; validation and hashing normalize the same error back to back
def normalize_signature(text: str) -> str:
    """Reduce a raw error to its stable shape.

    In order: removes terminal escapes (before lowercasing: their final byte is
    case-sensitive); lowercases; removes ESC-less colour codes; turns CRLF into LF and other
    control characters into spaces; replaces quoted values with `'<*>'` (keeping both quote
    characters, and before a lone CR becomes a line break, so `‘bash\\r’` stays one line);
    turns remaining CRs into LFs; then replaces URLs, Windows and POSIX paths, timestamps,
    UUIDs, IPv4 addresses, hex addresses, long hex ids, versions and other numbers with
    `<url>`, `<path>`, `<ts>`, `<uuid>`, `<ip>`, `<addr>`, `<hex>`, `<ver>`, `<n>`; shortens
    caret and dash underlines; collapses whitespace inside each line and drops blank lines.
    Multi-line input keeps its lines. Idempotent: normalizing the output changes nothing.
    """
    text = _clean(text)
    text = _QUOTED.sub(_replace_quoted, text)
    text = text.replace("\r", "\n")
    text = _replace_bare(text)
    # Each guard is a character the pattern cannot match without: skipping is only for speed.
    if "^" in text or "~" in text:
        text = _CARETS.sub("^", text)
    if "--" in text:
        text = _DASHES.sub("-", text)
    text = _SED_COMMAND_CODE.sub(r"\1<*>", text)
    if ":" in text:
        text = _URL.sub("<url>", text)
    if "\\" in text or ":/" in text:
        text = _WINDOWS_PATH.sub("<path>", text)
    if "/" in text or "." in text:
        text = _POSIX_PATH.sub("<path>", text)
    if _DIGIT.search(text):
        text = _TIMESTAMP.sub("<ts>", text)
        if "-" in text:
            text = _UUID.sub("<uuid>", text)
        if "." in text:
            text = _IPV4.sub("<ip>", text)
        if "0x" in text:
            text = _HEX_ADDRESS.sub("<addr>", text)
        text = _LONG_HEX.sub("<hex>", text)
        text = _VERSION.sub("<ver>", text)
        text = _NUMBER.sub(_replace_number, text)
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    text = "\n".join(line for line in lines if line)
    if "not found" in text or "unknown command" in text:
        text = _SHELL_NOT_FOUND.sub("'<*>': command not found", text)
    return text


def quoted_values(text: str) -> list[str]:
    """The raw quoted values of an error (lowercased, in order), e.g. the missing module's name.

    They are exactly the values `normalize_signature` replaced with `'<*>'`, found the same
    way, without the quote characters and otherwise untouched (a CR inside `‘bash\\r’` is
    kept); bare values (`bash: nvm: command not found`) are among them. Together with the signature hash they tell a duplicate (same error, same value)
    from a sibling (same error shape, a different module).
    """
    cleaned = _clean(text)
    found = [(m.start(), m.group(0)[1:-1]) for m in _QUOTED.finditer(cleaned)]
    bare = _QUOTED.sub(lambda m: " " * len(m.group(0)), cleaned).replace("\r", "\n")  # same offsets, no quotes
    for literal, rule in _BARE_VALUES:
        if literal in bare:
            found += [(m.start(), m.group("v")) for m in rule.finditer(bare)]
    return [value for _, value in sorted(found)]


def signature_hash(text: str) -> str:
    """Hex SHA-256 of the normalized signature."""
    return hashlib.sha256(normalize_signature(text).encode("utf-8")).hexdigest()
