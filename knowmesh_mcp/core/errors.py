"""The one error type every adapter renders: status, code, message and the spec's details.

HTTP sends `to_body()` with `status`; MCP returns the same body as an `isError` tool
result; the CLI prints `message` and exits 2 (bad input) or 1 (runtime error).
"""

from __future__ import annotations

from typing import Any

from pydantic_core import ErrorDetails


class KnowmeshError(Exception):
    """A domain error with the spec's status and code.

    `details` go inside `error` (e.g. `field`, `current_revision`, `conflicting_answers`);
    `top_level` goes beside it (the spec puts `canonical` and `next` there).
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        top_level: dict[str, Any] | None = None,
        **details: Any,
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.top_level = top_level or {}

    def to_body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.details}, **self.top_level}


def not_found(what: str, value: str) -> KnowmeshError:
    return KnowmeshError(404, f"{what}_not_found", f"no {what} {value!r}")


def bad_parameter(name: str, message: str, code: str = "invalid_parameter") -> KnowmeshError:
    return KnowmeshError(400, code, message, field=name)


def remote_error(message: str) -> KnowmeshError:
    """A remote mesh answered something that is not a knowmesh answer (sync, remote stdio)."""
    return KnowmeshError(502, "remote_error", message)


BUSY_RETRY_SECONDS = 5


def database_busy() -> KnowmeshError:
    """A write that waited out SQLite's busy timeout: another process on the same file (a second
    server, an import) holds the write lock. Nothing was written; the same request can be retried."""
    return KnowmeshError(
        503,
        "database_busy",
        "another process is writing to this mesh's database and did not "
        f"finish in time; nothing was written: retry in {BUSY_RETRY_SECONDS} s",
        retry_after_seconds=BUSY_RETRY_SECONDS,
    )


def storage_full() -> KnowmeshError:
    """A write that met a full disk (SQLite's SQLITE_FULL, PostgreSQL's SQLSTATE 53100 disk_full).
    The transaction was rolled back, so nothing was written. 507 Insufficient Storage says what it
    is: the server cannot store what the request carries, through no fault of the request; unlike
    503 database_busy it does not pass by itself, so there is no Retry-After."""
    return KnowmeshError(
        507,
        "storage_full",
        "the disk holding this mesh's database is full: nothing was written; retry once its operator has freed space",
    )


def read_only_database() -> KnowmeshError:
    """A write to a mesh whose database may only be read (a read-only file or folder, a read-only
    mount): it is opened read-only so searches and reads work, and every write is refused before it
    starts. 403, as a write to `serve --read-only` is: the request is understood and never allowed here."""
    return KnowmeshError(
        403,
        "read_only_database",
        "this mesh's database may only be read (a read-only file or "
        "folder): nothing was written; searches and reads still work",
    )


class DatabaseUnusable(KnowmeshError):
    """The database path cannot be opened as a knowmesh database (not SQLite, another
    application's SQLite, a missing folder, no permission, locked).

    Raised by `Store.open` before it changes anything; `message` is one line naming the
    path, which the CLI prints alone (exit 2, or 1 when the database is only busy).
    """

    def __init__(self, path: str, message: str, *, status: int = 400, code: str = "database_unusable"):
        super().__init__(status, code, message, path=path)
        self.path = path


# What a pydantic error type means, in the words our own messages use (after the field's name).
_TYPE_WORDS = {
    "missing": "is required",
    "extra_forbidden": "is not a known field here",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "list_type": "must be an array",
    "tuple_type": "must be an array",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}


def plain_words(item: ErrorDetails) -> str:
    """One pydantic error (an item of `ValidationError.errors()`) as plain words after its field:
    "must have at most 20 items (it has 21)", not "List should have at most 20 items after
    validation, not 21". An unknown type keeps pydantic's message, lowercased."""
    kind, ctx = item["type"], item.get("ctx") or {}
    if kind in _TYPE_WORDS:
        return _TYPE_WORDS[kind]
    if kind == "string_too_short":
        return (
            "must not be empty"
            if ctx.get("min_length") == 1
            else f"must be at least {ctx.get('min_length')} characters"
        )
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length'):,} characters"
    if kind in ("too_short", "too_long"):
        bound = "at least" if kind == "too_short" else "at most"
        limit = ctx.get("min_length" if kind == "too_short" else "max_length")
        return f"must have {bound} {limit} item{'s' if limit != 1 else ''} (it has {ctx.get('actual_length')})"
    if kind in ("literal_error", "enum"):
        return f"must be {ctx.get('expected')}"
    comparisons = {
        "greater_than_equal": ("ge", ">="),
        "less_than_equal": ("le", "<="),
        "greater_than": ("gt", ">"),
        "less_than": ("lt", "<"),
    }
    if kind in comparisons:
        key, sign = comparisons[kind]
        return f"must be {sign} {ctx.get(key)}"
    message = str(item.get("msg", "is invalid")).removeprefix("Value error, ")
    return f"is invalid: {message[:1].lower()}{message[1:]}"
