"""Pages for people: `/nodes`, `/nodes/{id}`, `/docs` (HTML) and `/v1/docs/{doc}.md`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.routing import Route

from .service import Service


def page_routes(current: Callable[[], Service]) -> list[Any]:
    return []
