"""Text analysis shared by indexing and querying: terms, stems, stopwords, synonyms, and the
signature keys of a text.

Indexed text and queries go through the same `term_key`, so a query word and a document
word meet exactly when their keys are equal (`installing` and `installed` both become
`instal`; `mac`, `osx` and `darwin` all become `macos`). A camel-case identifier is also split
into its words (`ModuleNotFoundError` is `modulenotfounderror` and `modul`, `not`, `found`,
`error`), so "module not found" meets it. Depends on `normalize` and `tool_output`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

import snowballstemmer

from knowmesh_mcp.core.normalize import normalize_signature
from knowmesh_mcp.search.tool_output import decisive_lines

# Unicode letters and digits: the characters FTS5's unicode61 tokenizer keeps in a token, so a
# term produced here is always a single FTS5 token and can be quoted safely. Longer runs are
# split into pieces of at most MAX_TERM_LENGTH, alike on the index and the query side.
MAX_TERM_LENGTH = 64
_TOKEN = re.compile(rf"[^\W_]{{1,{MAX_TERM_LENGTH}}}", re.UNICODE)
# The words of a camel-case token: `ModuleNotFoundError`, `ERR_OSSL` stays whole (split on `_` already).
_CAMEL = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_MIXED = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")  # a lower-upper step: camel case
_DIGITS = re.compile(r"(?:\d\D*){5}")

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
    """Lowercase alphanumeric tokens of `text`, each at most MAX_TERM_LENGTH long; a camel-case
    token (`ModuleNotFoundError`, `EADDRINUSE` is not one) is followed by its words."""
    if text.islower() or not _MIXED.search(text):
        return _TOKEN.findall(text.lower())
    found = []
    for token in _TOKEN.findall(text):
        lowered = token.lower()
        found.append(lowered)
        # only a token with both an upper- and a lowercase letter can be camel case
        if lowered != token and not token.isupper() and _is_camel(token):
            parts = _CAMEL.findall(token)
            if len(parts) > 1:
                found.extend(part.lower() for part in parts)
    return found


def camel_words(text: str) -> list[str]:
    """The words of the camel-case tokens of `text`, lowercase (`ModuleNotFoundError`: module, not, found, error)."""
    return [part.lower() for token in _TOKEN.findall(text) if _is_camel(token) for part in _CAMEL.findall(token)]


def _is_camel(token: str) -> bool:
    """A lower-upper step and fewer than five digits: a hash run into a word (`…1ed1beaStarting`) is not a name."""
    return bool(_MIXED.search(token)) and not _DIGITS.search(token)


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


# Words that name an ecosystem or one of its tools: "maven" in a question means java, `npm ERR!`
# in output means node. Kept as term keys, so they meet query terms directly.
_ECOSYSTEM_WORDS = {
    "python": "python pip pip3 pytest venv virtualenv conda jupyter ipython notebook traceback modulenotfounderror "
    "importerror setuptools poetry uv pypi django flask",
    "node": "node nodejs npm npx yarn pnpm jest webpack vite eslint express react",
    "typescript": "typescript tsc tsconfig ts",
    "java": "java javac jvm jdk jre maven mvn gradle gradlew kotlin spring",
    "go": "go golang goroutine gopath goroot gofmt",
    "rust": "rust rustc cargo crate crates rustup",
    "docker": "docker dockerfile compose buildkit buildx container containers",
    "kubernetes": "kubernetes k8s kubectl kubelet pod pods helm minikube kubeconfig",
    "git": "git github gitlab bitbucket",
    "shell": "bash zsh shell sh ssh fish",
    "postgres": "postgres postgresql psql pg libpq",
    "dotnet": "dotnet nuget msbuild csproj csharp",
    "ruby": "ruby gem gems bundler bundle rails rake",
    "php": "php composer laravel artisan",
    "make": "makefile gmake",
}
ECOSYSTEM_WORDS: dict[str, frozenset[str]] = {
    ecosystem: frozenset(term_key(word) for word in words.split()) for ecosystem, words in _ECOSYSTEM_WORDS.items()
}


def named_ecosystems(terms: Iterable[str]) -> frozenset[str]:
    """The ecosystems whose names or tools are among `terms` (term keys)."""
    present = set(terms)
    return frozenset(ecosystem for ecosystem, words in ECOSYSTEM_WORDS.items() if words & present)


@lru_cache(maxsize=65536)
def slug_keys(node_id: str) -> frozenset[str]:
    """Every key of a node id's slug (`node/cannot-read-properties-then`: ..., `properti`, `then`)."""
    return frozenset(index_terms(node_id.split("/", 1)[-1]).split())


def slug_terms(node_id: str) -> frozenset[str]:
    """The content-word keys of a node id's slug: what its author named the problem by."""
    return slug_keys(node_id) - STOPWORDS


def signature_keys(text: str, key: Callable[[str], str] = normalize_signature) -> set[str]:
    """Normalized forms under which a stored error (or a query) is matched exactly.

    The whole text and each of its decisive lines, normalized (by `key`): a traceback pasted whole
    and a node that stores only its last line meet on the last line.
    """
    keys = {key(text)}
    if "\n" in text.strip():
        keys.update(key(line) for line in decisive_lines(text))
    keys.discard("")
    return keys
