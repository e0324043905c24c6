"""Gateway configuration from the environment (STREAMTTS_GATEWAY_*), validated at start.

API keys map to tenants: `STREAMTTS_GATEWAY_API_KEYS="key1:tenantA,key2:tenantB"` and/or a
file (`STREAMTTS_GATEWAY_API_KEYS_FILE`, one `key:tenant` per line, `#` comments; or YAML/JSON
with key ids, client-network allowlists and expiries, re-read while running: see keyring). Rate
limits are token buckets per tenant: a default (`RATE_PER_S`, `RATE_BURST`) and overrides
(`STREAMTTS_GATEWAY_TENANT_RATES="tenantA=2:5,tenantB=10:20"`, i.e. tokens/s:burst).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from streamtts.errors import ConfigError
from streamtts.gateway.key_files import TENANT_RE, parse_api_keys, tenants_by_key
from streamtts.runtime.env_vars import ENV_PREFIX, env_bool, env_float, env_int
from streamtts.runtime.trace_query import DEFAULT_QUERY_URL, query_url

PREFIX = "STREAMTTS_GATEWAY_"


@dataclass(frozen=True)
class RateLimit:
    per_s: float
    burst: float


@dataclass(frozen=True)
class GatewaySettings:
    host: str = "127.0.0.1"
    port: int = 8080
    api_keys: dict[str, str] = field(default_factory=dict, repr=False)
    """API key → tenant."""
    default_rate: RateLimit = RateLimit(per_s=5.0, burst=20.0)
    tenant_rates: dict[str, RateLimit] = field(default_factory=dict)
    max_text_chars: int = 5_000
    """Longer texts are refused with 413 (the stages' own limit is higher)."""
    max_body_bytes: int = 64 * 1024
    cache_entries: int = 2_000
    """Requests whose status (and streamed chunks) the gateway keeps in memory (LRU)."""
    cache_max_bytes: int = 256 * 1024 * 1024
    """Audio the status cache may hold in all (finished requests are evicted first)."""
    cache_ttl_s: float = 900.0
    """Finished requests leave the cache after this long."""
    request_timeout_s: float = 120.0
    """Longest wait for the next piece of audio before a stream gives up (504)."""
    history_lookback_s: float = 86_400.0
    """How far back `tts.results` is searched for a request the cache no longer holds."""
    lookup_rate: RateLimit = RateLimit(per_s=1.0, burst=10.0)
    """Per tenant: searches of `tts.results` for ids the cache does not hold (each one reads up
    to `history_lookback_s` of results) — polling unknown ids cannot occupy the search."""
    history_waiters: int = 8
    """Searches allowed to wait for the one running; more are refused at once (503)."""
    presign: bool = True
    """Ask the sink for a presigned URL of the stored file (shown in the status)."""
    ws_idle_timeout_s: float = 60.0
    ws_max_sessions: int = 64
    ws_max_sessions_per_tenant: int = 16
    """One tenant cannot hold every slot: its sessions beyond this are refused (1013)."""
    ws_max_contexts: int = 8
    """Turns one WebSocket session may have open at once (`context_id`): each is a streamed
    utterance the segment stage holds state for, so a socket cannot open them without bound."""
    ws_queue_frames: int = 64
    """Outbound frames buffered per WebSocket session before the session stops pulling audio."""
    ws_send_timeout_s: float = 30.0
    """A client that reads nothing for this long while its queue is full is disconnected."""
    broker_loss_s: float = 10.0
    """With no Kafka broker reachable for this long, open WebSocket sessions end with an error
    event `kafka_unavailable` (close 1013, try again later); new requests are refused 503 with
    Retry-After as soon as none is reachable, and served again once one is."""
    worker_metrics_urls: tuple[str, ...] = ()
    """Workers' /metrics URLs, summarised by /v1/pipeline for the web page."""
    api_keys_file: str | None = None
    """Keys file, re-read every `keys_reload_s` while running (key rotation, see keyring)."""
    keys_reload_s: float = 5.0
    tenant_allow: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Tenant → client networks (CIDR) its keys may be used from (none listed: any)."""
    trusted_proxies: tuple[str, ...] = ()
    """Networks of reverse proxies whose X-Forwarded-For names the client; from any other
    peer the header is ignored (anyone can send it)."""
    tls_certfile: str | None = None
    tls_keyfile: str | None = None
    audit_queue: int = 10_000
    """Audit events waiting for Kafka; beyond it the Kafka copy is dropped (counted)."""
    unauthenticated_audit_rate: RateLimit = RateLimit(per_s=1.0, burst=20.0)
    """Per client address: audit events of callers without a valid key (the rest are counted,
    not queued); all such callers together get 50 times this."""
    hash_tenant_labels: bool = False
    """Write tenants in metric labels as `t-` + 12 hex digits of their SHA-256, not by name."""
    trace_ui_url: str = DEFAULT_QUERY_URL
    """A tracing UI the web page links a finished request's trace in (`<url>/trace/<id>`, as
    Jaeger's UI names it): STREAMTTS_TRACE_UI_URL, else STREAMTTS_TRACE_QUERY_URL, else the
    local Jaeger; empty: no link. Shown only while the gateway records spans."""

    @property
    def ws_max_frame_bytes(self) -> int:
        """Largest WebSocket frame uvicorn accepts (bigger ones close the socket, 1009), so a
        client cannot make the server buffer and parse megabytes: the longest text frame is
        `max_text_chars` UTF-8 characters plus its JSON wrapper."""
        return 4 * self.max_text_chars + 4096

    def __post_init__(self) -> None:
        for tenant in {*self.api_keys.values(), *self.tenant_rates, *self.tenant_allow}:
            if not TENANT_RE.match(tenant):
                raise ConfigError(f"{PREFIX}API_KEYS: tenant {tenant!r} must match {TENANT_RE.pattern}")
        for name in (
            "max_text_chars",
            "max_body_bytes",
            "cache_entries",
            "cache_max_bytes",
            "ws_max_sessions",
            "ws_max_sessions_per_tenant",
            "ws_queue_frames",
            "ws_max_contexts",
            "audit_queue",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{PREFIX}{name.upper()} must be at least 1")
        for rate in (self.default_rate, *self.tenant_rates.values(), self.unauthenticated_audit_rate):
            if rate.per_s <= 0 or rate.burst < 1:
                raise ConfigError(f"{PREFIX} rate limits need tokens/s > 0 and burst ≥ 1, got {rate}")

        if (self.tls_certfile is None) != (self.tls_keyfile is None):
            raise ConfigError(f"{PREFIX}TLS_CERT and {PREFIX}TLS_KEY go together: set both or neither")
        if self.keys_reload_s <= 0:
            raise ConfigError(f"{PREFIX}KEYS_RELOAD_S must be > 0")

    def rate_for(self, tenant: str) -> RateLimit:
        return self.tenant_rates.get(tenant, self.default_rate)

    @classmethod
    def from_env(cls) -> GatewaySettings:
        keys = parse_api_keys(_get("API_KEYS", ""))
        key_file = _get("API_KEYS_FILE", "")
        if key_file:
            keys.update(tenants_by_key(key_file))
        d = cls()
        return cls(
            host=_get("HOST", d.host),
            port=env_int("PORT", d.port, PREFIX),
            api_keys=keys,
            default_rate=RateLimit(
                env_float("RATE_PER_S", d.default_rate.per_s, PREFIX),
                env_float("RATE_BURST", d.default_rate.burst, PREFIX),
            ),
            tenant_rates=parse_tenant_rates(_get("TENANT_RATES", "")),
            max_text_chars=env_int("MAX_TEXT_CHARS", d.max_text_chars, PREFIX),
            max_body_bytes=env_int("MAX_BODY_BYTES", d.max_body_bytes, PREFIX),
            cache_entries=env_int("CACHE_ENTRIES", d.cache_entries, PREFIX),
            cache_max_bytes=env_int("CACHE_MAX_BYTES", d.cache_max_bytes, PREFIX),
            cache_ttl_s=env_float("CACHE_TTL_S", d.cache_ttl_s, PREFIX),
            request_timeout_s=env_float("REQUEST_TIMEOUT_S", d.request_timeout_s, PREFIX),
            history_lookback_s=env_float("HISTORY_LOOKBACK_S", d.history_lookback_s, PREFIX),
            presign=env_bool("PRESIGN", True, PREFIX),
            ws_idle_timeout_s=env_float("WS_IDLE_TIMEOUT_S", d.ws_idle_timeout_s, PREFIX),
            ws_max_sessions=env_int("WS_MAX_SESSIONS", d.ws_max_sessions, PREFIX),
            ws_max_sessions_per_tenant=env_int(
                "WS_MAX_SESSIONS_PER_TENANT", d.ws_max_sessions_per_tenant, PREFIX
            ),
            ws_queue_frames=env_int("WS_QUEUE_FRAMES", d.ws_queue_frames, PREFIX),
            ws_max_contexts=env_int("WS_MAX_CONTEXTS", d.ws_max_contexts, PREFIX),
            broker_loss_s=env_float("BROKER_LOSS_S", d.broker_loss_s, PREFIX),
            ws_send_timeout_s=env_float("WS_SEND_TIMEOUT_S", d.ws_send_timeout_s, PREFIX),
            worker_metrics_urls=tuple(u for u in _get("WORKER_METRICS_URLS", "").split(",") if u.strip()),
            api_keys_file=key_file or None,
            keys_reload_s=env_float("KEYS_RELOAD_S", d.keys_reload_s, PREFIX),
            tenant_allow=parse_tenant_allow(_get("TENANT_ALLOW", "")),
            trusted_proxies=tuple(_get("TRUSTED_PROXIES", "").replace(",", " ").split()),
            tls_certfile=_get("TLS_CERT", "") or None,
            tls_keyfile=_get("TLS_KEY", "") or None,
            audit_queue=env_int("AUDIT_QUEUE", d.audit_queue, PREFIX),
            unauthenticated_audit_rate=RateLimit(
                env_float("UNAUTHENTICATED_AUDIT_PER_S", d.unauthenticated_audit_rate.per_s, PREFIX),
                env_float("UNAUTHENTICATED_AUDIT_BURST", d.unauthenticated_audit_rate.burst, PREFIX),
            ),
            hash_tenant_labels=env_bool("HASH_TENANT_LABELS", d.hash_tenant_labels, PREFIX),
            trace_ui_url=os.environ.get(ENV_PREFIX + "TRACE_UI_URL", query_url()).strip().rstrip("/"),
        )


def parse_tenant_allow(text: str) -> dict[str, tuple[str, ...]]:
    """`tenantA=10.0.0.0/8 192.168.1.0/24,tenantB=2001:db8::/32`."""
    out: dict[str, tuple[str, ...]] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        tenant, sep, nets = item.partition("=")
        if not sep or not tenant.strip() or not nets.split():
            raise ConfigError(f"{PREFIX}TENANT_ALLOW: expected tenant=cidr [cidr ...], got {item!r}")
        out[tenant.strip()] = tuple(nets.split())
    return out


def parse_tenant_rates(text: str) -> dict[str, RateLimit]:
    rates: dict[str, RateLimit] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        try:
            tenant, spec = item.split("=")
            per_s, burst = spec.split(":")
            rates[tenant.strip()] = RateLimit(float(per_s), float(burst))
        except ValueError:
            raise ConfigError(f"{PREFIX}TENANT_RATES: expected tenant=per_s:burst, got {item!r}") from None
    return rates


def _get(name: str, default: str) -> str:
    return os.environ.get(PREFIX + name, default)
