"""Run the app with uvicorn inside an existing event loop (CLI and tests)."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette

from streamtts.gateway.settings import GatewaySettings


def uvicorn_options(settings: GatewaySettings) -> dict[str, Any]:
    """What both the CLI and the in-process server pass to uvicorn."""
    return {
        "ws_max_size": settings.ws_max_frame_bytes,
        # X-Forwarded-For is ours to judge (TRUSTED_PROXIES, see clientaddr): uvicorn would
        # otherwise believe it from any loopback peer and rewrite the client address.
        "proxy_headers": False,
        "ssl_certfile": settings.tls_certfile,
        "ssl_keyfile": settings.tls_keyfile,
    }


@dataclass
class GatewayServer:
    app: Starlette
    host: str = "127.0.0.1"
    port: int = 0
    """0: an ephemeral port, known after `start()`."""
    server: uvicorn.Server = field(init=False)
    _task: asyncio.Task[None] | None = None

    async def start(self) -> int:
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        settings = self.app.state.gateway.settings
        config = uvicorn.Config(
            self.app,
            lifespan="on",
            log_level="warning",
            ws_ping_interval=20.0,
            **uvicorn_options(settings),
        )
        self.server = uvicorn.Server(config)
        self._task = asyncio.create_task(self.server.serve(sockets=[sock]))
        while not self.server.started:
            if self._task.done():  # start-up failed (lifespan error): surface it
                await self._task
                raise RuntimeError("gateway server stopped during start-up")
            await asyncio.sleep(0.02)
        return self.port

    async def stop(self) -> None:
        if self._task is None:
            return
        self.server.should_exit = True
        await self._task

    @property
    def url(self) -> str:
        scheme = "https" if self.app.state.gateway.settings.tls_certfile else "http"
        return f"{scheme}://{self.host}:{self.port}"
