"""The one error type every adapter renders: status, code, message and the spec's details.

HTTP sends `to_body()` with `status`; MCP returns the same body as an `isError` tool
result; the CLI prints `message` and exits 2 (bad input) or 1 (runtime error).
"""

from __future__ import annotations

from typing import Any


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


class DatabaseUnusable(KnowmeshError):
    """The database path cannot be opened as a knowmesh database (not SQLite, another
    application's SQLite, a missing folder, no permission, locked).

    Raised by `Store.open` before it changes anything; `message` is one line naming the
    path, which the CLI prints alone (exit 2, or 1 when the database is only busy).
    """

    def __init__(self, path: str, message: str, *, status: int = 400, code: str = "database_unusable"):
        super().__init__(status, code, message, path=path)
        self.path = path
