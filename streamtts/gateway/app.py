"""The ASGI app: Starlette routes over a `Gateway` (producer, fan-out consumer, object store).

Starlette + uvicorn: a small ASGI toolkit with first-class streaming responses and
WebSockets, no pydantic-v1 pin (the project's contracts are pydantic v2), and no framework
magic to fight; request bodies are validated with the same pydantic the contracts use.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.types import Message, Receive, Scope, Send

from streamtts.gateway import routes_openai, routes_ops, routes_speech, routes_stream
from streamtts.gateway.audit_trail import AuditMiddleware
from streamtts.gateway.errors import ApiError, api_error_handler, http_error_handler
from streamtts.gateway.middleware import HttpMiddleware
from streamtts.gateway.service import Gateway
from streamtts.gateway.settings import GatewaySettings
from streamtts.runtime.settings import Settings

# Label values come from this set only: the method of a request line is any token a client
# sends (up to 16 KiB in uvicorn), and each distinct value would be a new time series.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class MetricsMiddleware(HttpMiddleware):
    """Counts responses per route template (not raw path: ids would explode cardinality)."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.monotonic()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                route = getattr(scope.get("route"), "path", "unmatched")
                self.gateway.metrics.http_seconds.labels(route).observe(time.monotonic() - start)
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"] if scope["method"] in KNOWN_METHODS else "other"
            self.gateway.metrics.http_requests.labels(route, method, str(status)).inc()


def create_app(settings: GatewaySettings, pipeline: Settings, gateway: Gateway | None = None) -> Starlette:
    gw = gateway or Gateway.build(settings, pipeline)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gw.start()
        try:
            yield
        finally:
            await gw.stop()

    app = Starlette(
        routes=[*routes_ops.routes, *routes_speech.routes, *routes_openai.routes, *routes_stream.routes],
        exception_handlers={ApiError: api_error_handler, HTTPException: http_error_handler},
        lifespan=lifespan,
    )
    app.state.gateway = gw
    app.add_middleware(AuditMiddleware, gateway=gw)
    app.add_middleware(MetricsMiddleware, gateway=gw)
    return app
