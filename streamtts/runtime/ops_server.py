"""/healthz, /readyz and /metrics of a worker (aiohttp, on the worker's event loop).

/healthz answers from the event loop itself, so a blocked loop fails it; it also reports the
loop's measured lag, and fails for a worker still starting past its start-up bound (it should
have exited: the supervisor replaces it). /readyz names every unmet condition. /metrics is
Prometheus text, or OpenMetrics (with trace-id exemplars) for a scraper whose Accept header
asks for `application/openmetrics-text`; with a token (`STREAMTTS_METRICS_TOKEN`) it answers only
`Authorization: Bearer <token>` (the probes stay open: the orchestrator that calls them has
no token).
"""

from __future__ import annotations

import asyncio
import hmac
import time
from dataclasses import KW_ONLY, dataclass, field

import orjson
from aiohttp import web

from streamtts.runtime.lifecycle import cancel_and_wait
from streamtts.runtime.readiness import Readiness
from streamtts.runtime.telemetry import Telemetry

LOOP_LAG_LIMIT_S = 5.0


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Whether an Authorization header carries `Bearer <token>` (compared in constant time)."""
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@dataclass(eq=False)
class OpsServer:
    readiness: Readiness
    telemetry: Telemetry
    host: str = "0.0.0.0"
    port: int = 0
    """The port to bind (0: any free one); after `start`, the one bound."""
    _: KW_ONLY
    metrics_token: str | None = field(default=None, repr=False)
    loop_lag_s: float = field(default=0.0, init=False)
    _runner: web.AppRunner | None = field(default=None, init=False, repr=False)
    _lag_task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    async def start(self) -> int:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as err:
            from streamtts.errors import ConfigError

            await self._runner.cleanup()
            raise ConfigError(f"ops port {self.port} is not available: {err.strerror or err}") from None
        server = site._server
        self.port = server.sockets[0].getsockname()[1] if server and server.sockets else self.port  # type: ignore[attr-defined]
        self._lag_task = asyncio.create_task(self._measure_lag())
        return self.port

    async def stop(self) -> None:
        await cancel_and_wait(self._lag_task)
        if self._runner:
            await self._runner.cleanup()

    async def _measure_lag(self) -> None:
        # The loop's responsiveness: how late a 0.5 s timer fires. Inference off the loop
        # keeps this near zero; a blocking call on the loop shows up here and in /healthz.
        while True:
            start = time.monotonic()
            await asyncio.sleep(0.5)
            self.loop_lag_s = max(0.0, time.monotonic() - start - 0.5)

    async def _healthz(self, request: web.Request) -> web.Response:
        overdue = self.readiness.startup_overdue()
        ok = self.loop_lag_s < LOOP_LAG_LIMIT_S and not overdue
        status = "startup_overdue" if overdue else "ok" if ok else "loop_blocked"
        body = {
            "status": status,
            "loop_lag_ms": round(self.loop_lag_s * 1000, 1),
            "uptime_s": round(time.monotonic() - self.readiness.started_at, 1),
        }
        return web.json_response(body, status=200 if ok else 503, dumps=lambda o: orjson.dumps(o).decode())

    async def _readyz(self, request: web.Request) -> web.Response:
        problems = self.readiness.problems()
        body = {"ready": not problems, "problems": problems}
        return web.json_response(
            body, status=200 if not problems else 503, dumps=lambda o: orjson.dumps(o).decode()
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.metrics_token and not bearer_matches(
            request.headers.get("Authorization"), self.metrics_token
        ):
            return web.json_response(
                {"error": "unauthorized", "message": "/metrics needs Authorization: Bearer <token>"},
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
        body, content_type = self.telemetry.exposition_for(request.headers.get("Accept"))
        return web.Response(
            body=body, headers={"Content-Type": content_type, "X-Content-Type-Options": "nosniff"}
        )
