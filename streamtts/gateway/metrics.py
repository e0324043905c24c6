"""The gateway's Prometheus metrics, in a registry the app owns (no global state).

Tenant names are labels (`submitted`); with `hash_tenants` each is written as `t-` and the
first 12 hex digits of its SHA-256, so a dashboard or a scrape shows no customer names
(an operator matches one with `printf %s NAME | sha256sum | cut -c1-12`).
"""

from __future__ import annotations

import hashlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from streamtts.runtime.exemplars import negotiated
from streamtts.runtime.telemetry import LATENCY_BUCKETS


def hashed_tenant(tenant: str) -> str:
    """The label a tenant gets under `hash_tenant_labels`."""
    return "t-" + hashlib.sha256(tenant.encode()).hexdigest()[:12]


class GatewayMetrics:
    def __init__(self, *, hash_tenants: bool = False) -> None:
        self.hash_tenants = hash_tenants
        r = self.registry = CollectorRegistry()
        self.http_requests = Counter(
            "streamtts_gateway_http_requests",
            "HTTP requests answered",
            ["route", "method", "status"],
            registry=r,
        )
        self.http_seconds = Histogram(
            "streamtts_gateway_http_seconds", "Time to the response head", ["route"], registry=r
        )
        self.submitted = Counter(
            "streamtts_gateway_submitted", "Requests put on tts.requests", ["endpoint", "tenant"], registry=r
        )
        self.ttfa = Histogram(
            "streamtts_gateway_time_to_first_audio_seconds",
            "Submission → first audio chunk seen by the gateway",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.rejected = Counter(
            "streamtts_gateway_rejected", "Requests refused at the edge", ["code"], registry=r
        )
        self.fanout_records = Counter(
            "streamtts_gateway_fanout_records", "Records read by the shared consumer", ["kind"], registry=r
        )
        self.cache_entries = Gauge(
            "streamtts_gateway_cache_entries", "Requests in the status cache", registry=r
        )
        self.ws_sessions = Gauge("streamtts_gateway_ws_sessions", "Open WebSocket sessions", registry=r)
        self.ws_closed = Counter(
            "streamtts_gateway_ws_closed",
            "WebSocket sessions ended, by why: end, idle, disconnect, slow_reader, error",
            ["reason"],
            registry=r,
        )
        self.ws_frames = Counter(
            "streamtts_gateway_ws_audio_frames", "Audio frames sent on WebSockets", registry=r
        )
        self.audio_bytes = Counter(
            "streamtts_gateway_audio_bytes", "Audio bytes sent to clients", ["endpoint"], registry=r
        )

        self.audit_suppressed = Counter(
            "streamtts_gateway_audit_suppressed",
            "Audit events of unauthenticated callers past their budget: counted, not queued",
            registry=r,
        )
        self.key_reloads = Counter(
            "streamtts_gateway_key_reloads",
            "Keys file re-reads: ok (new keys in force), invalid (old keys kept)",
            ["outcome"],
            registry=r,
        )

    def tenant_label(self, tenant: str) -> str:
        """What a tenant is called in a label: its name, or its hash (see the module)."""
        return hashed_tenant(tenant) if self.hash_tenants else tenant

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def exposition_for(self, accept: str | None) -> tuple[bytes, str]:
        """What /metrics answers: OpenMetrics (with exemplars) if `accept` asks for it, else
        Prometheus text (see `runtime.exemplars`)."""
        return negotiated(self.registry, accept)
