"""How the `/v1` route table is built: a route per path serving a handler per method (`route`),
routes under `/v1/nodes/` that answer every method with their own 405 (`node_route`), and the
`{name:segment}` and `{name:node}` path convertors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

EVERY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]

Handler = Callable[[Request], Awaitable[Response]]


class ByMethod:
    """One endpoint for a path served by several handlers, one per method (HEAD: GET's): Starlette
    answers a 405 from the first route whose path matches, so two routes on one path would each
    hide the other's methods. A method it does not serve is a 405 naming those it does."""

    def __init__(self, handlers: dict[str, Handler]) -> None:
        self.handlers = handlers
        self.allow = ", ".join(("HEAD", *handlers) if "GET" in handlers else handlers)

    async def endpoint(self, request: Request) -> Response:
        handler = self.handlers.get("GET" if request.method == "HEAD" else request.method)
        if handler is None:
            raise HTTPException(
                405, f"{request.method} is not allowed here; use {self.allow}", headers={"Allow": self.allow}
            )
        return await handler(request)


def route(path: str, **handlers: Handler) -> Route:
    """A route serving `handlers` by method; Starlette answers any other method's 405."""
    endpoint = next(iter(handlers.values())) if len(handlers) == 1 else ByMethod(handlers).endpoint
    return Route(path, endpoint, methods=list(handlers))


def node_route(path: str, **handlers: Handler) -> Route:
    """A route under /v1/nodes/ that takes every method, so that the first path that matches
    answers, with its own 405."""
    return Route(path, ByMethod(handlers).endpoint, methods=EVERY_METHOD)


class SegmentConvertor(Convertor[str]):
    """`{name:segment}`: one path segment, possibly empty (a pinned version's parts as the
    dispatcher split them; an empty one is the id's 400, not the router's 404)."""

    regex = "[^/]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return str(value)


class NodeIdConvertor(SegmentConvertor):
    """`{name:node}`: a node id's two segments. A route ending in a suffix (`/article`, `/status`)
    takes only this, so the node `python/article` is read at `/v1/nodes/python/article` rather than
    taken for the article of a node `python`; a malformed id falls through to the read route's 400."""

    regex = "[^/]*/[^/]*"


register_url_convertor("segment", SegmentConvertor())
register_url_convertor("node", NodeIdConvertor())
