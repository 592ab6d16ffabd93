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

NORMALIZER_VERSION = 1

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


# Order matters: each pattern runs on the output of the ones before it.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?\b"
    r"|\b\d{4}[-/]\d{2}[-/]\d{2}\b"
    r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
)
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_HEX_ADDRESS = re.compile(r"\b0x[0-9a-f]+\b")
_LONG_HEX = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+")
_WINDOWS_PATH = re.compile(r"(?<![\w])(?:[a-z]:|\\\\[^\\\s]+)\\(?:[^\\\s'\"<>:|?*]+\\?)*[^\\\s'\"<>:|?*,;)]*")
_POSIX_PATH = re.compile(
    r"(?<![\w.<>/-])(?:~|\.{1,2})?(?:/[^\s'\"<>:,;()\[\]]+)+/?|(?<![\w<>/])(?:[\w.-]+/)+[\w.-]+\.[a-z0-9]{1,5}\b"
)
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|‘[^’\n]*’|“[^”\n]*”")
_LINE_NUMBER = re.compile(r"\b(line|ln|row|col|column)\s+\d+\b")
_LOCATION = re.compile(r"(<path>|\w)(:\d+)+\b")
_VERSION = re.compile(r"(?<![\w.])v?\d+(?:\.\d+){1,3}(?:[-+.]?[a-z0-9]+(?:\.\d+)*)?\b")
_NUMBER = re.compile(r"(?<![\w<])\d+(?:\.\d+)?\b")
_SPACES = re.compile(r"[ \t\r\f\v]+")


def _replace_quoted(match: re.Match[str]) -> str:
    text = match.group(0)
    return text[0] + "<*>" + text[-1]


def normalize_signature(text: str) -> str:
    """Reduce a raw error to its stable shape.

    Lowercases; removes ANSI colour codes and control characters; replaces timestamps,
    UUIDs, hex addresses, URLs, Windows and POSIX paths, quoted values, line/column
    numbers, versions and other numbers with placeholders; collapses spaces inside each
    line and drops blank lines. Idempotent: normalizing the output changes nothing.
    """
    text = _ANSI.sub("", text)
    text = text.lower()
    text = _CONTROL.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = _TIMESTAMP.sub("<ts>", text)
    text = _UUID.sub("<uuid>", text)
    text = _HEX_ADDRESS.sub("<addr>", text)
    text = _LONG_HEX.sub("<hex>", text)
    text = _QUOTED.sub(_replace_quoted, text)
    text = _URL.sub("<url>", text)
    text = _WINDOWS_PATH.sub("<path>", text)
    text = _POSIX_PATH.sub("<path>", text)
    text = _LINE_NUMBER.sub(r"\1 <n>", text)
    text = _LOCATION.sub(r"\1:<n>", text)
    text = _VERSION.sub("<ver>", text)
    text = _NUMBER.sub("<n>", text)
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def quoted_values(text: str) -> list[str]:
    """The quoted values of a raw error (lowercased, in order), e.g. the missing module's name.

    Together with the signature hash they tell a duplicate (same error, same value) from
    a sibling (same error shape, a different module).
    """
    return [m.group(0)[1:-1].strip().lower() for m in _QUOTED.finditer(_ANSI.sub("", text))]


def signature_hash(text: str) -> str:
    """Hex SHA-256 of the normalized signature."""
    return hashlib.sha256(normalize_signature(text).encode("utf-8")).hexdigest()
