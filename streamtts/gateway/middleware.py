"""The shape of the gateway's ASGI middlewares: they see HTTP calls only (WebSocket sessions
and the lifespan pass through untouched) and reach the `Gateway` for metrics and settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:  # the Gateway's audit log is a middleware's neighbour: types only, no cycle
    from streamtts.gateway.service import Gateway


class HttpMiddleware:
    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One HTTP call: the subclass's work around `self.app(scope, receive, send)`."""
        raise NotImplementedError
