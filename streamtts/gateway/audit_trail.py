"""Audit events of gateway actions: one per HTTP call of the speech API, recorded by a
middleware when the response is finished (so streamed audio is counted to its last byte),
and the WebSocket session events (`ws_open`, `ws_close`) recorded by the session code.

The handlers fill in what only they know — who the caller is (`authenticate`), the request
id of a submit, why a call was refused (the error handler) — in a per-call `AuditContext`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from starlette.requests import HTTPConnection
from starlette.types import Message, Receive, Scope, Send

from streamtts.gateway.clientaddr import client_address
from streamtts.gateway.errors import AUDIT_SCOPE_KEY
from streamtts.gateway.middleware import HttpMiddleware
from streamtts.gateway.networks import Address
from streamtts.gateway.ratelimit import RateLimiter
from streamtts.gateway.settings import RateLimit
from streamtts.runtime.jsonlog import log_event
from streamtts.schemas.audit import AuditEvent

if TYPE_CHECKING:  # the Gateway holds a ThrottledAudit: imported for types only
    from streamtts.gateway.service import Gateway

log = logging.getLogger("streamtts.audit")

SCOPE_KEY = AUDIT_SCOPE_KEY

# (method, route template) → audited action. Ops endpoints (probes, metrics, voices, the page)
# carry no tenant data and are left out.
ROUTE_ACTIONS: dict[tuple[str, str], str] = {
    ("POST", "/v1/speech"): "submit",
    ("POST", "/v1/audio/speech"): "submit",
    ("GET", "/v1/speech/{request_id}"): "status",
    ("DELETE", "/v1/speech/{request_id}"): "cancel",
    ("GET", "/v1/speech/{request_id}/audio"): "audio_read",
    ("GET", "/v1/speech/{request_id}/captions"): "captions_read",
}


class AuditRecorder(Protocol):
    """What the gateway needs of an audit log (features.audit.log.AuditLog)."""

    def record(self, event: AuditEvent) -> None: ...
    async def start(self) -> None: ...
    async def flush(self) -> None: ...
    async def stop(self) -> None: ...


class ThrottledAudit:
    """The gateway's audit trail with a budget for unauthenticated callers.

    An event without a tenant (no key, or a key nobody issued) costs a token from its client
    address's bucket and from one bucket shared by all such callers; past either, the event
    is counted (`streamtts_gateway_audit_suppressed_total`), logged once as it starts, and
    not queued, so bad keys sent at line rate cannot fill the audit queue and push out real
    tenants' events. Events of identified callers are always recorded.
    """

    def __init__(
        self,
        inner: AuditRecorder,
        *,
        per_client: RateLimit,
        overall: RateLimit,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = 10_000,
        on_suppressed: Callable[[], None] | None = None,
    ) -> None:
        self.inner = inner
        self._clients = RateLimiter(lambda _: per_client, clock, max_keys=max_clients)
        self._overall = RateLimiter(lambda _: overall, clock)
        self._on_suppressed = on_suppressed
        self._quiet: set[str] = set()
        """Clients whose suppression was logged and has not ended yet (bounded like the buckets)."""
        self._max_clients = max_clients
        self.suppressed = 0

    @property
    def tracked_clients(self) -> int:
        return len(self._clients.buckets)

    def record(self, event: AuditEvent) -> None:
        if event.tenant is None:
            client = event.client or "unknown"
            # Both budgets are asked, and in this order: a client past its own budget does
            # not spend the shared one that other clients' first refusals need.
            if self._clients.take(client) > 0 or self._overall.take("*") > 0:
                self._suppress(client, event)
                return
            self._quiet.discard(client)
        self.inner.record(event)

    def _suppress(self, client: str, event: AuditEvent) -> None:
        self.suppressed += 1
        if self._on_suppressed is not None:
            self._on_suppressed()
        if client not in self._quiet and len(self._quiet) < self._max_clients:
            self._quiet.add(client)
            log_event(
                log,
                "audit_throttled",
                logging.WARNING,
                client=client,
                action=event.action,
                outcome=event.outcome,
            )

    # The lifecycle is the inner log's.
    async def start(self) -> None:
        await self.inner.start()

    async def flush(self) -> None:
        await self.inner.flush()

    async def stop(self) -> None:
        await self.inner.stop()


@dataclass
class AuditContext:
    address: Address | None
    started: float = field(default_factory=time.monotonic)
    tenant: str | None = None
    key_id: str | None = None
    request_id: str | None = None
    outcome: str | None = None
    """The error code when the call was refused; None until then (then `ok` or by status)."""
    details: dict[str, str | int] = field(default_factory=dict)

    def event(self, action: str, *, status: int | None, outcome: str, sent: int) -> AuditEvent:
        return AuditEvent.new(
            source="gateway",
            action=action,
            outcome=outcome,
            tenant=self.tenant,
            key_id=self.key_id,
            client=str(self.address) if self.address is not None else None,
            request_id=self.request_id[:256] if self.request_id else None,
            status=status,
            bytes=sent,
            duration_ms=round((time.monotonic() - self.started) * 1000, 2),
            details=self.details,
        )


def audit_ws_submit(conn: HTTPConnection, request_id: str, outcome: str, session_id: str) -> None:
    """A WebSocket session's request (a turn, or a sentence) audited as a submit, like one
    over HTTP."""
    event = audit_context(conn).event("submit", status=None, outcome=outcome, sent=0)
    gw: Gateway = conn.app.state.gateway
    gw.audit.record(
        event.model_copy(
            update={"request_id": request_id, "details": {"via": "ws", "session_id": session_id}}
        )
    )


def audit_context(conn: HTTPConnection) -> AuditContext:
    """This call's context (made on first use for calls the middleware does not see)."""
    ctx = conn.scope.get(SCOPE_KEY)
    if ctx is None:
        gw: Gateway = conn.app.state.gateway
        ctx = conn.scope[SCOPE_KEY] = AuditContext(client_address(conn.scope, gw.trusted_proxies))
    assert isinstance(ctx, AuditContext)
    return ctx


def outcome_of(ctx: AuditContext, status: int) -> str:
    if ctx.outcome is not None:
        return ctx.outcome
    return "ok" if status < 400 else f"http_{status}"


class AuditMiddleware(HttpMiddleware):
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        ctx = scope[SCOPE_KEY] = AuditContext(client_address(scope, self.gateway.trusted_proxies))
        status: int | None = None
        sent = 0

        async def counting_send(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        aborted = True
        try:
            await self.app(scope, receive, counting_send)
            aborted = False
        finally:
            method = "GET" if scope["method"] == "HEAD" else scope["method"]
            action = ROUTE_ACTIONS.get((method, getattr(scope.get("route"), "path", "")))
            if action is not None:
                if ctx.request_id is None:
                    ctx.request_id = scope.get("path_params", {}).get("request_id")
                # A body cut short (client gone, stream failed mid-way) is not an "ok".
                outcome = "aborted" if aborted and ctx.outcome is None else outcome_of(ctx, status or 500)
                self.gateway.audit.record(ctx.event(action, status=status, outcome=outcome, sent=sent))
