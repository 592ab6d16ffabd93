"""Text analysis shared by indexing and querying: terms, stems, stopwords, synonyms, and the
decisive line of pasted tool output.

Indexed text and queries go through the same `term_keys`, so a query word and a document
word meet exactly when their keys are equal (`installing` and `installed` both become
`instal`; `mac`, `osx` and `darwin` all become `macos`). Depends only on `normalize`.
"""

from __future__ import annotations

import re
from functools import lru_cache

import snowballstemmer

from .normalize import normalize_signature

# Unicode letters and digits: the characters FTS5's unicode61 tokenizer keeps in a token, so a
# term produced here is always a single FTS5 token and can be quoted safely. Longer runs are
# split into pieces of at most MAX_TERM_LENGTH, alike on the index and the query side.
MAX_TERM_LENGTH = 64
_TOKEN = re.compile(rf"[^\W_]{{1,{MAX_TERM_LENGTH}}}", re.UNICODE)

SYNONYMS: dict[str, str] = {
    "mac": "macos",
    "osx": "macos",
    "darwin": "macos",
    "win": "windows",
    "win32": "windows",
    "win64": "windows",
    "k8s": "kubernetes",
    "py": "python",
    "python3": "python",
    "js": "node",
    "nodejs": "node",
    "pg": "postgres",
    "postgresql": "postgres",
    "psql": "postgres",
    "golang": "go",
}

# Common English function words: they carry no meaning in a search for an error.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers him his how i if in into is it its itself just me more most my
    no nor not now of off on once only or other our out over own same she should so some such than
    that the their them then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours get gets got getting
    keep keeps still even also after when tried try trying says said say""".split()
)

# Placeholders the signature normalizer puts in place of values; never search terms.
PLACEHOLDERS = frozenset({"path", "n", "ver", "addr", "uuid", "ts", "hex", "url", "ip"})

_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def term_key(token: str) -> str:
    """The index key of one lowercase token: synonym folded, then stemmed (words only)."""
    token = SYNONYMS.get(token, token)
    if token.isalpha() and len(token) > 3:
        return _STEMMER.stemWord(token)
    return token


def tokens(text: str) -> list[str]:
    """Lowercase alphanumeric tokens of `text`, each at most MAX_TERM_LENGTH long."""
    return _TOKEN.findall(text.lower())


def index_terms(text: str) -> str:
    """The text as FTS5 stores it: every token replaced by its key, order kept."""
    return " ".join(map(term_key, tokens(text)))


def query_terms(text: str, *, drop_stopwords: bool, limit: int = 32) -> list[str]:
    """Distinct keys of a query, in order, without placeholders (and without stopwords if asked)."""
    seen: dict[str, None] = {}
    for token in tokens(text):
        if token in PLACEHOLDERS or (drop_stopwords and token in STOPWORDS):
            continue
        key = term_key(token)
        if key not in seen:
            seen[key] = None
            if len(seen) == limit:
                break
    return list(seen)


# -- decisive lines of pasted output --------------------------------------------------------

# Lines that state the error itself, strongest first. Each is a pattern over one stripped line.
_DECISIVE = [
    re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Warning|Interrupt|Exit|Failure)\b:?"),  # Python, Java, JS
    re.compile(r"^(?:error|fatal|panic)(?:\[[A-Za-z]?\d+\])?:", re.IGNORECASE),  # rustc, git, go, gcc
    re.compile(r"^(?:ERROR|FATAL|PANIC):\s"),  # postgres
    re.compile(r"^npm (?:ERR!|error) (?:code|errno|\w+Error)"),
    re.compile(r"^\S+\(\d+,\d+\): error TS\d+:"),  # tsc
    re.compile(r"^\S+:\d+:\d+: (?:fatal )?error:"),  # gcc, clang
    re.compile(r"^[\w./\\-]+:\d+(?::\d+)?: \S"),  # go, eslint, make: file:line[:col]: message
    re.compile(r"\b(?:error|Error|ERROR)\b.*:"),
    re.compile(r"(?:No such file or directory|Permission denied|not found|command not found|refused|denied)"),
    re.compile(r"^(?:WARNING|Warning|warning|WARN|npm WARN)\b:?"),  # often names the cause of what follows
]
_NOISE = re.compile(
    r"^(?:\s|at |File \"|Traceback \(most recent call last\)|\^|~|-->|\||=|help:|note:|hint:|goroutine |"
    r"npm (?:ERR!|error) (?:A complete log|\s*$)|\d+ \|)"
)
MAX_LINES = 400


def looks_like_error(line: str) -> bool:
    """True when a line has the shape of tool output rather than of a sentence."""
    return any(pattern.search(line) for pattern in _DECISIVE)


def decisive_lines(text: str, limit: int = 6) -> list[str]:
    """The lines of pasted output that carry the error, most decisive first.

    A Python traceback ends in its exception line; compilers print `error:` / `error[E…]`
    first; npm, Postgres and git prefix theirs. Frames, source excerpts, carets and hints
    are skipped. Single-line input is returned as it is.
    """
    lines = [line.strip() for line in text.splitlines()[:MAX_LINES]]
    lines = [line for line in lines if line]
    if len(lines) <= 1:
        return lines
    ranked: list[tuple[int, int, str]] = []
    traceback = any(line.startswith("Traceback (most recent call last)") for line in lines)
    for position, line in enumerate(lines):
        if _NOISE.match(line) and not _DECISIVE[0].match(line):
            continue
        strength = next((rank for rank, pattern in enumerate(_DECISIVE) if pattern.search(line)), None)
        if strength is None:
            continue
        # In a traceback the last exception line is the error; elsewhere the first error wins.
        order = -position if traceback and strength == 0 else position
        ranked.append((strength, order, line))
    ranked.sort()
    chosen = [line for _, _, line in ranked[:limit]]
    if chosen:
        return chosen
    # Nothing looks like an error: the last lines that are not frames or excerpts.
    plain = [line for line in lines if not _NOISE.match(line)]
    return (plain or lines)[-limit:][::-1]


def signature_keys(text: str) -> set[str]:
    """Normalized forms under which a stored error (or a query) is matched exactly.

    The whole text and each of its decisive lines, normalized: a traceback pasted whole and a
    node that stores only its last line meet on the last line.
    """
    keys = {normalize_signature(text)}
    if "\n" in text.strip():
        keys.update(normalize_signature(line) for line in decisive_lines(text))
    keys.discard("")
    return keys
