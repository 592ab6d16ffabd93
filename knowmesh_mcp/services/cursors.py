"""Opaque cursors: a page's position (`after`, and what else the page was asked for) as URL-safe
base64 of its JSON, shared by the node list and the change feed. A cursor this server did not
issue is a 400 `invalid_cursor`.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from knowmesh_mcp.core.errors import bad_parameter
from knowmesh_mcp.core.limits import json_problem


def encode_cursor(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, *, name: str = "cursor") -> dict[str, Any]:
    try:
        payload = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        raise bad_parameter(name, f"{name} is not one this server issued", code="invalid_cursor") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("after"), str) or json_problem(payload):
        raise bad_parameter(name, f"{name} is not one this server issued", code="invalid_cursor")
    return payload
