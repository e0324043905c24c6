"""Connection settings shared by every command, read from the environment.

One place for endpoints and credentials so producers, sinks, stages, tools and tests agree.
Secrets come only from the environment (never from files checked into the repo).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TypeVar

from streamtts.errors import ConfigError
from streamtts.schemas.release import RELEASE_PATTERN
from streamtts.schemas.request import TENANT_PATTERN

ENV_PREFIX = "STREAMTTS_"
N = TypeVar("N", int, float)


def _env(name: str, default: str) -> str:
    return os.environ.get(ENV_PREFIX + name, default)


def env_number(name: str, default: N, cast: type[N], kind: str, prefix: str = ENV_PREFIX) -> N:
    """`prefix + name` from the environment as a number; unset or empty → `default`."""
    raw = os.environ.get(prefix + name)
    if raw is None or raw == "":
        return default
    try:
        return cast(raw)
    except ValueError:
        raise ConfigError(f"{prefix}{name} must be {kind}, got {raw!r}") from None


def env_int(name: str, default: int, prefix: str = ENV_PREFIX) -> int:
    return env_number(name, default, int, "an integer", prefix)


def env_float(name: str, default: float, prefix: str = ENV_PREFIX) -> float:
    return env_number(name, default, float, "a number", prefix)


def env_bool(name: str, default: bool, prefix: str = ENV_PREFIX) -> bool:
    raw = os.environ.get(prefix + name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{prefix}{name} must be true or false (1/0), got {raw!r}")


@dataclass(frozen=True)
class KafkaSettings:
    """How to reach Kafka. Security fields are passed through to aiokafka unchanged."""

    bootstrap_servers: str = "127.0.0.1:9092"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    topic_prefix: str = ""
    """Prefix for every topic name: lets tests and tenants share one cluster without clashes."""
    ssl_cafile: str | None = None
    """CA bundle for SSL / SASL_SSL (None: the system's trust store)."""


@dataclass(frozen=True)
class S3Settings:
    """Object storage endpoint (MinIO or any S3)."""

    endpoint: str = "127.0.0.1:9000"
    access_key: str = "streamtts"
    secret_key: str = field(default="streamtts-secret", repr=False)
    secure: bool = False
    region: str | None = None
    bucket: str = "tts-audio"


@dataclass(frozen=True)
class Settings:
    kafka: KafkaSettings
    s3: S3Settings

    @classmethod
    def from_env(cls) -> Settings:
        kafka = KafkaSettings(
            bootstrap_servers=_env("KAFKA_BOOTSTRAP", KafkaSettings.bootstrap_servers),
            security_protocol=_env("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT"),
            sasl_mechanism=os.environ.get(ENV_PREFIX + "KAFKA_SASL_MECHANISM") or None,
            sasl_username=os.environ.get(ENV_PREFIX + "KAFKA_SASL_USERNAME") or None,
            sasl_password=os.environ.get(ENV_PREFIX + "KAFKA_SASL_PASSWORD") or None,
            topic_prefix=_env("TOPIC_PREFIX", ""),
            ssl_cafile=os.environ.get(ENV_PREFIX + "KAFKA_CAFILE") or None,
        )
        endpoint = _env("S3_ENDPOINT", S3Settings.endpoint)
        secure = endpoint.startswith("https://")
        endpoint = endpoint.removeprefix("https://").removeprefix("http://").rstrip("/")
        s3 = S3Settings(
            endpoint=endpoint,
            access_key=_env("S3_ACCESS_KEY", S3Settings.access_key),
            secret_key=_env("S3_SECRET_KEY", S3Settings.secret_key),
            secure=secure,
            region=os.environ.get(ENV_PREFIX + "S3_REGION") or None,
            bucket=_env("S3_BUCKET", S3Settings.bucket),
        )
        _refuse_default_credentials_off_host(s3)
        return cls(kafka=kafka, s3=s3)


_LOOPBACK = ("127.", "localhost", "[::1]", "::1")


def _refuse_default_credentials_off_host(s3: S3Settings) -> None:
    """The built-in S3 credentials are the local stack's; sending them to another host means
    the deployment forgot to configure its own (and would leak a known pair)."""
    default = s3.access_key == S3Settings.access_key and s3.secret_key == S3Settings.secret_key
    if default and not s3.endpoint.startswith(_LOOPBACK):
        raise ConfigError(
            f"{ENV_PREFIX}S3_ACCESS_KEY/{ENV_PREFIX}S3_SECRET_KEY are the built-in development "
            f"credentials, refused for the non-local endpoint {s3.endpoint!r}: set your own"
        )


@dataclass(frozen=True)
class PipelineSettings:
    """Knobs of the stages. Defaults suit a 2-core node; env vars override (STREAMTTS_*)."""

    first_max_chars: int = 40
    """Size of the first span of a request: it bounds the time to first audio."""
    first_min_chars: int = 12
    """The first span takes whole clauses until it is this long (a lone "您好，" loses its
    prosody); 0 keeps the first clause alone."""
    max_chars: int = 150
    """Size of later spans (CJK characters count double)."""
    max_text_chars: int = 20_000
    """Longest accepted request text; longer ones are dead-lettered (text_too_long)."""
    chunk_max_ms: int = 5_000
    """Longest PCM chunk on Kafka (24 kHz s16 → 240 KB, ~320 KB as base64): far below 1 MB."""
    synth_threads: int = 0
    """onnxruntime intra-op threads per inference; 0 = every CPU this process may use (its affinity mask)."""
    synth_spin: bool = False
    """Let onnxruntime's intra-op threads busy-wait between operators. Off by default: on a
    node shared with Kafka and the other stages, spinning threads burn the cores those need
    (Piper pipeline throughput 0.77× → 0.96× of direct synthesis with it off, side by side).
    Worth turning on only for a synthesize worker with cores of its own."""
    synth_lookahead: int = 32
    """Segments a synthesize worker reads ahead so a new request's first segment can overtake
    queued later segments of other requests (head-of-line blocking)."""
    synth_workers: int = 1
    """Concurrent inferences per synthesize worker (bounded executor; more = queueing)."""
    render_cache: bool = True
    """Serve repeated spans from the render cache instead of the model (see README)."""
    render_cache_mb: int = 256
    """Memory tier of the render cache per synthesize process, in MiB."""
    render_cache_shared: bool = True
    """Share renders between workers through object storage (prefix `render-cache/`)."""
    render_cache_preload: int = 500
    """Entries of the shared tier a synthesize worker loads into memory at start."""
    render_cache_prefix: str = "render-cache/"
    """Object key prefix of the shared tier, in the audio bucket."""
    warm_voices: tuple[str, ...] = ("jm_kumo",)
    long_text_chars: int = 300
    """Requests longer than this (or priority "batch") go to the long-text synthesize pool;
    priority "interactive" always goes to the short pool."""
    ops_port: int = 0
    """Port of /healthz, /readyz, /metrics (0: any free port, logged at start)."""
    canary_interval_s: float = 60.0
    """Seconds between canary runs on synthesize workers (0: only the start-up reference)."""
    shutdown_timeout_s: float = 30.0
    """SIGTERM: time to finish in-flight work, commit and flush before exiting anyway."""
    markup: str = "reject"
    """Plain request text with markup tags: "reject" (dead-letter: markup_not_allowed),
    "strip", or "ssml" (a text that is a `<speak>` document is read as SSML, other markup is
    rejected). A request with `text_type: "ssml"` is always read as SSML."""
    ssml_unknown: str = "ignore"
    """SSML elements outside the subset: "ignore" (their text is read, with a note on the
    result) or "reject" (dead-letter: unsupported_ssml)."""
    processing_guarantee: str = "at_least_once"
    """"at_least_once" (idempotent outputs, consumers dedupe) or "exactly_once" (transactions)."""
    session_timeout_s: float = 10.0
    reply_topic_prefix: str = "tts.reply."
    """A request's `reply_topic` must start with the topic prefix + this: no request can make
    the pipeline write into tts.results, a DLQ or another tenant's topics."""
    metadata_refresh_s: float = 5.0
    """How often consumers refresh cluster metadata. A group that joined while the broker was
    recovering may have seen its source topic missing and got no partitions; the next refresh
    notices the topic and rejoins (Kafka's default, 5 minutes, left such a stage idle that long)."""
    presign_expiry_s: int = 3600
    storage_retries: int = 8
    """In-place attempts (capped exponential backoff, 0.25 s doubling to 8 s) before a
    storage failure is dead-lettered: ~32 s, covering a storage restart."""
    sink_stale_s: float = 300.0
    """A request whose next audio has not reached the sink for this long is failed visibly
    (a segment lost upstream). Raise it where the long pool can queue a request longer."""
    g2p_budget_ms: int = 200
    """A span whose phonemization takes longer is re-synthesized with the fallback voice."""
    inference_budget_s: float = 4.0
    """Inference budget of a span: this plus `inference_budget_per_char_s` per character."""
    inference_budget_per_char_s: float = 0.15
    breaker_threshold: int = 3
    """Consecutive failures of a (voice, language) class that open its circuit breaker."""
    breaker_open_s: float = 5.0
    retention_days: int = 0
    """Stored audio and captions of every tenant are deleted by object storage after this
    many days (0: kept until deleted by hand); applied by `streamtts storage apply`."""
    tenant_retention_days: tuple[str, ...] = ()
    """Per-tenant retention, `tenant=days` (0: kept), over `retention_days`."""
    release: str = "stable"
    """The release a synthesize worker serves: "stable" reads tts.segments[.long] in today's
    groups; another NAME reads tts.release.NAME.segments[.long] in its own groups."""
    release_voices: tuple[str, ...] = ()
    """That release's voice mapping, "REQUESTED=RENDERED" each (e.g. "jm_kumo=jm_kumo:0.8+jf_alpha:0.2")."""
    release_guard: bool = True
    """Workers that run the segment stage also run the release guard (automatic rollback);
    off where `streamtts release guard` runs on its own."""

    def __post_init__(self) -> None:
        positive = (
            "first_max_chars",
            "max_chars",
            "max_text_chars",
            "chunk_max_ms",
            "synth_workers",
            "long_text_chars",
            "storage_retries",
            "sink_stale_s",
            "g2p_budget_ms",
            "breaker_threshold",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be at least 1, got {getattr(self, name)}")
        if self.max_chars < self.first_max_chars:
            raise ConfigError(
                f"{ENV_PREFIX}MAX_CHARS ({self.max_chars}) must be ≥ FIRST_MAX_CHARS ({self.first_max_chars})"
            )
        if not 0 <= self.first_min_chars <= self.first_max_chars:
            raise ConfigError(
                f"{ENV_PREFIX}FIRST_MIN_CHARS ({self.first_min_chars}) must be 0–FIRST_MAX_CHARS "
                f"({self.first_max_chars})"
            )
        if not 0 <= self.ops_port <= 65535:
            raise ConfigError(f"{ENV_PREFIX}OPS_PORT must be 0–65535, got {self.ops_port}")
        if self.retention_days < 0:
            raise ConfigError(f"{ENV_PREFIX}RETENTION_DAYS must be ≥ 0, got {self.retention_days}")
        self.tenant_retention()  # validates the entries
        if not re.match(RELEASE_PATTERN, self.release):
            raise ConfigError(
                f"{ENV_PREFIX}RELEASE must be lower-case letters, digits and dashes (≤ 40), "
                f"got {self.release!r}"
            )
        voice_map(self.release_voices)  # a malformed pair fails here, naming it
        if self.chunk_max_ms > 15_000:
            raise ConfigError(f"{ENV_PREFIX}CHUNK_MAX_MS must be ≤ 15000 (records must stay far below 1 MB)")

    def tenant_retention(self) -> dict[str, int]:
        """`tenant_retention_days` as tenant → days."""
        out: dict[str, int] = {}
        for item in self.tenant_retention_days:
            tenant, _, days = item.partition("=")
            tenant = tenant.strip()
            if not re.match(TENANT_PATTERN, tenant) or not days.strip().isdigit():
                raise ConfigError(
                    f"{ENV_PREFIX}TENANT_RETENTION_DAYS: expected tenant=days (days ≥ 0), got {item!r}"
                )
            out[tenant] = int(days)
        return out

    def retention_for(self, tenant: str) -> int:
        """Days the tenant's stored files are kept (0: until deleted by hand)."""
        return self.tenant_retention().get(tenant, self.retention_days)

    @classmethod
    def from_env(cls) -> PipelineSettings:
        guarantee = _env("PROCESSING_GUARANTEE", cls.processing_guarantee)
        if guarantee not in ("at_least_once", "exactly_once"):
            raise ConfigError(
                f"{ENV_PREFIX}PROCESSING_GUARANTEE must be at_least_once or exactly_once, got {guarantee!r}"
            )
        markup = _env("MARKUP", cls.markup)
        if markup not in ("reject", "strip", "ssml"):
            raise ConfigError(f"{ENV_PREFIX}MARKUP must be reject, strip or ssml, got {markup!r}")
        unknown = _env("SSML_UNKNOWN", cls.ssml_unknown)
        if unknown not in ("ignore", "reject"):
            raise ConfigError(f"{ENV_PREFIX}SSML_UNKNOWN must be ignore or reject, got {unknown!r}")
        warm = tuple(v for v in _env("WARM_VOICES", ",".join(cls.warm_voices)).split(",") if v)
        return cls(
            first_max_chars=env_int("FIRST_MAX_CHARS", cls.first_max_chars),
            first_min_chars=env_int("FIRST_MIN_CHARS", cls.first_min_chars),
            max_chars=env_int("MAX_CHARS", cls.max_chars),
            max_text_chars=env_int("MAX_TEXT_CHARS", cls.max_text_chars),
            chunk_max_ms=env_int("CHUNK_MAX_MS", cls.chunk_max_ms),
            synth_threads=env_int("SYNTH_THREADS", cls.synth_threads),
            synth_spin=env_bool("SYNTH_SPIN", cls.synth_spin),
            synth_workers=env_int("SYNTH_WORKERS", cls.synth_workers),
            render_cache=env_bool("RENDER_CACHE", cls.render_cache),
            render_cache_mb=env_int("RENDER_CACHE_MB", cls.render_cache_mb),
            render_cache_shared=env_bool("RENDER_CACHE_SHARED", cls.render_cache_shared),
            render_cache_preload=env_int("RENDER_CACHE_PRELOAD", cls.render_cache_preload),
            render_cache_prefix=_env("RENDER_CACHE_PREFIX", cls.render_cache_prefix),
            synth_lookahead=env_int("SYNTH_LOOKAHEAD", cls.synth_lookahead),
            warm_voices=warm,
            long_text_chars=env_int("LONG_TEXT_CHARS", cls.long_text_chars),
            ops_port=env_int("OPS_PORT", cls.ops_port),
            canary_interval_s=env_float("CANARY_INTERVAL_S", cls.canary_interval_s),
            shutdown_timeout_s=env_float("SHUTDOWN_TIMEOUT_S", cls.shutdown_timeout_s),
            markup=markup,
            ssml_unknown=unknown,
            processing_guarantee=guarantee,
            session_timeout_s=env_float("SESSION_TIMEOUT_S", cls.session_timeout_s),
            metadata_refresh_s=env_float("METADATA_REFRESH_S", cls.metadata_refresh_s),
            reply_topic_prefix=_env("REPLY_TOPIC_PREFIX", cls.reply_topic_prefix),
            presign_expiry_s=env_int("PRESIGN_EXPIRY_S", cls.presign_expiry_s),
            storage_retries=env_int("STORAGE_RETRIES", cls.storage_retries),
            sink_stale_s=env_float("SINK_STALE_S", cls.sink_stale_s),
            g2p_budget_ms=env_int("G2P_BUDGET_MS", cls.g2p_budget_ms),
            inference_budget_s=env_float("INFERENCE_BUDGET_S", cls.inference_budget_s),
            inference_budget_per_char_s=env_float(
                "INFERENCE_BUDGET_PER_CHAR_S", cls.inference_budget_per_char_s
            ),
            breaker_threshold=env_int("BREAKER_THRESHOLD", cls.breaker_threshold),
            breaker_open_s=env_float("BREAKER_OPEN_S", cls.breaker_open_s),
            retention_days=env_int("RETENTION_DAYS", cls.retention_days),
            tenant_retention_days=tuple(
                v.strip() for v in _env("TENANT_RETENTION_DAYS", "").split(",") if v.strip()
            ),
            release=_env("RELEASE", cls.release) or cls.release,
            release_guard=env_bool("RELEASE_GUARD", cls.release_guard),
            release_voices=tuple(v.strip() for v in _env("RELEASE_VOICES", "").split(",") if v.strip()),
        )


def voice_map(items: tuple[str, ...]) -> dict[str, str]:
    """("a=b", "c=d") → {"a": "b", "c": "d"}; a malformed pair is a ConfigError naming it."""
    pairs: dict[str, str] = {}
    for item in items:
        asked, sep, used = (x.strip() for x in item.partition("="))
        if not sep or not asked or not used:
            raise ConfigError(f"{ENV_PREFIX}RELEASE_VOICES: {item!r} is not REQUESTED=RENDERED")
        pairs[asked] = used
    return pairs
