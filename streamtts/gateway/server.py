"""Run the app with uvicorn inside an existing event loop (CLI and tests)."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette


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
        config = uvicorn.Config(
            self.app,
            lifespan="on",
            log_level="warning",
            ws_ping_interval=20.0,
            ws_max_size=self.app.state.gateway.settings.ws_max_frame_bytes,
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
        return f"http://{self.host}:{self.port}"
