"""The stages' knobs (`PipelineSettings`), one group per concern, read from STREAMTTS_*
variables and the config file; `specs()` lists every setting as both see it."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

from streamtts.errors import ConfigError
from streamtts.runtime.env_vars import ENV_PREFIX
from streamtts.runtime.setting_specs import SettingSpec, check_fields, group_types, specs_of
from streamtts.schemas.release import BASE_RELEASE, RELEASE_PATTERN
from streamtts.schemas.request import TENANT_PATTERN

# --- Pipeline settings ------------------------------------------------------------------------
# One group per concern; a stage reads the groups it needs. Each setting is named once, as a
# field: its environment variable is STREAMTTS_ + the group's `env_prefix` + the field's name
# upper-cased, unless `_env_alias` keeps another (today's) one; its config-file keys are
# `pipeline.<group>.<field>` and the flat `pipeline.<variable without STREAMTTS_, lower case>`
# every release so far has read. See `specs()`.


def _env_alias(default: Any, env: str) -> Any:
    """A field read from STREAMTTS_`env`: the variable's name predates the groups."""
    return field(default=default, metadata={"env": env})


@dataclass(frozen=True)
class SettingsGroup:
    """Base of the pipeline's setting groups: how their variables are named, and the checks
    every group shares, run at construction (`_check_fields`)."""

    env_prefix: ClassVar[str] = ""
    """Between STREAMTTS_ and a field's upper-cased name in its variable (see `specs()`)."""
    at_least_one: ClassVar[tuple[str, ...]] = ()
    """The group's settings that must be at least 1."""

    def __post_init__(self) -> None:
        _check_fields(self, self.at_least_one)


@dataclass(frozen=True)
class TextSettings(SettingsGroup):
    """How a request's text becomes spans: span sizes, limits, markup, pool routing (segment)."""

    at_least_one: ClassVar[tuple[str, ...]] = (
        "first_max_chars",
        "max_chars",
        "max_text_chars",
        "long_text_chars",
        "stream_max_deltas",
    )
    first_max_chars: int = 40
    """Size of the first span of a request: it bounds the time to first audio."""
    first_min_chars: int = 12
    """The first span takes whole clauses until it is this long (a lone "您好，" loses its
    prosody); 0 keeps the first clause alone."""
    max_chars: int = 150
    """Size of later spans (CJK characters count double)."""
    max_text_chars: int = 20_000
    """Longest accepted request text; longer ones are dead-lettered (text_too_long)."""
    long_text_chars: int = 300
    """Requests longer than this (or priority "batch") go to the long-text synthesize pool;
    priority "interactive" always goes to the short pool."""
    markup: Literal["reject", "strip", "ssml"] = "reject"
    """Plain request text with markup tags: "reject" (dead-letter: markup_not_allowed),
    "strip", or "ssml" (a text that is a `<speak>` document is read as SSML, other markup is
    rejected). A request with `text_type: "ssml"` is always read as SSML."""
    ssml_unknown: Literal["ignore", "reject"] = "ignore"
    """SSML elements outside the subset: "ignore" (their text is read, with a note on the
    result) or "reject" (dead-letter: unsupported_ssml)."""
    stream_idle_s: float = 30.0
    """A streamed utterance that receives no delta for this long is ended (its result says
    `ended: idle`): a client that vanished mid-reply never holds one open."""
    stream_max_deltas: int = 20_000
    """Most text deltas one streamed utterance takes (its text is bounded by
    `max_text_chars`); past either, it is ended (`ended: limit`) and the delta dead-lettered."""
    stream_later_delay_ms: int = 1500
    """After the first span, held text waits this long for a sentence end before what is
    held is spoken up to its last whole word (the first span waits `max_buffer_delay_ms`)."""
    plan_budget_s: float = 5.0
    """Longest time the segment stage spends planning one request (off its event loop);
    past it the request is dead-lettered (too_costly) and the stage goes on with the next.
    5 s: a legitimate 20,000-character Chinese document plans in 0.7–2.8 s on a loaded
    2-core node; an adversarial one is cut off here instead of stalling its partition."""

    def __post_init__(self) -> None:
        if not self.stream_idle_s > 0:
            raise ConfigError(f"{ENV_PREFIX}STREAM_IDLE_S must be above 0, got {self.stream_idle_s}")
        if not self.plan_budget_s > 0:
            raise ConfigError(f"{ENV_PREFIX}PLAN_BUDGET_S must be above 0, got {self.plan_budget_s}")
        super().__post_init__()
        if self.max_chars < self.first_max_chars:
            raise ConfigError(
                f"{ENV_PREFIX}MAX_CHARS ({self.max_chars}) must be ≥ FIRST_MAX_CHARS ({self.first_max_chars})"
            )
        if not 0 <= self.first_min_chars <= self.first_max_chars:
            raise ConfigError(
                f"{ENV_PREFIX}FIRST_MIN_CHARS ({self.first_min_chars}) must be 0–FIRST_MAX_CHARS "
                f"({self.first_max_chars})"
            )


@dataclass(frozen=True)
class SynthesisSettings(SettingsGroup):
    """How a synthesize worker runs the models and hands on their audio."""

    env_prefix: ClassVar[str] = "SYNTH_"
    at_least_one: ClassVar[tuple[str, ...]] = ("workers", "chunk_max_ms")
    threads: int = 0
    """onnxruntime intra-op threads per inference; 0 = 1 with lanes (one run per lane and core),
    every CPU this process may use (its affinity mask) with `scheduler = "fifo"`."""
    spin: bool = False
    """Let onnxruntime's intra-op threads busy-wait between operators. Off by default: on a
    node shared with Kafka and the other stages, spinning threads burn the cores those need
    (Piper pipeline throughput 0.77× → 0.96× of direct synthesis with it off, side by side).
    Worth turning on only for a synthesize worker with cores of its own."""
    lookahead: int = 32
    """Segments a synthesize worker reads ahead so a new request's first segment can overtake
    queued later segments of other requests (head-of-line blocking)."""
    workers: int = 1
    """With `scheduler = "fifo"`: concurrent inferences per synthesize stage (bounded executor)."""
    scheduler: str = "lanes"
    """"lanes": one inference lane per core shared by the process's synthesize stages, first
    spans ahead of bulk work, long bulk spans cut into bounded calls, a bulk run stopped when a
    first span would wait past `preempt_after_ms` (docs/scheduling.md). "fifo": each stage
    renders one segment at a time on `threads` intra-op threads (the scheduler before lanes)."""
    lanes: int = 0
    """Inference lanes per synthesize process; 0 = one per usable CPU."""
    first_lanes: int = -1
    """Lanes that take only first spans, on top of `lanes`; -1 = as many as `lanes`, 0 = none.
    With them, bulk model calls run `bulk_nice` steps nicer, so a first span gets the CPU a
    bulk run was using at once, without stopping it (docs/scheduling.md)."""
    bulk_nice: int = 10
    """How much nicer (Linux thread nice, 0-19) bulk model calls run when there are first lanes."""
    preempt_after_ms: float = 500.0
    """A first span predicted to wait longer than this for a lane stops a bulk run."""
    load_report_s: float = 1.0
    """How often a synthesize worker publishes its load report on `tts.load` (admission
    reads it); 0 = never."""
    piece_ms: float = 500.0
    """Bulk model calls are cut (at clause boundaries) to about this much predicted compute; 0 = no cuts."""
    warm_voices: tuple[str, ...] = _env_alias(("jm_kumo",), "WARM_VOICES")
    """Voices loaded and warmed at start, so their first request pays no load time."""
    chunk_max_ms: int = _env_alias(5_000, "CHUNK_MAX_MS")
    """Longest PCM chunk on Kafka (24 kHz s16 → 240 KB, ~320 KB as base64): far below 1 MB."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.scheduler not in ("lanes", "fifo"):
            raise ConfigError(f"{ENV_PREFIX}SYNTH_SCHEDULER must be lanes or fifo, not {self.scheduler!r}")
        if self.first_lanes < -1:
            raise ConfigError(f"{ENV_PREFIX}SYNTH_FIRST_LANES must be -1 (one per lane), 0 or more")
        if not 0 <= self.bulk_nice <= 19:
            raise ConfigError(f"{ENV_PREFIX}SYNTH_BULK_NICE must be 0-19, not {self.bulk_nice}")
        if self.lanes < 0 or self.preempt_after_ms < 0 or self.piece_ms < 0 or self.load_report_s < 0:
            raise ConfigError(
                f"{ENV_PREFIX}SYNTH_LANES, _PREEMPT_AFTER_MS, _PIECE_MS and _LOAD_REPORT_S must be ≥ 0"
            )
        if self.chunk_max_ms > 15_000:
            raise ConfigError(f"{ENV_PREFIX}CHUNK_MAX_MS must be ≤ 15000 (records must stay far below 1 MB)")


@dataclass(frozen=True)
class DegradationSettings(SettingsGroup):
    """When synthesis gives up on a span or a voice and falls back (budgets, circuit breaker)."""

    at_least_one: ClassVar[tuple[str, ...]] = ("g2p_budget_ms", "breaker_threshold")
    g2p_budget_ms: int = 500
    """A span whose phonemization takes longer is re-synthesized with the fallback voice. 500,
    not 200: on a busy 2-core machine (two inference lanes, the suite's other processes) an
    OpenJTalk reading of a new Japanese sentence took over 200 ms twice in a row and the span
    fell to espeak-ng; a stalled parser (the field failure this guards) hangs for seconds."""
    inference_budget_s: float = 4.0
    """Inference budget of a span: this plus `inference_budget_per_char_s` per character."""
    inference_budget_per_char_s: float = 0.15
    """Seconds of inference budget per character of the span, over `inference_budget_s`."""
    breaker_threshold: int = 3
    """Consecutive failures of a (voice, language) class that open its circuit breaker."""
    breaker_open_s: float = 5.0
    """Seconds an open breaker stays open before one trial request (the half-open probe)."""


@dataclass(frozen=True)
class RenderCacheSettings(SettingsGroup):
    """The render cache of repeated spans (synthesize: memory tier, shared tier in storage)."""

    env_prefix: ClassVar[str] = "RENDER_CACHE_"
    enabled: bool = _env_alias(True, "RENDER_CACHE")
    """Serve repeated spans from the render cache instead of the model (see README)."""
    mb: int = 256
    """Memory tier of the render cache per synthesize process, in MiB."""
    shared: bool = True
    """Share renders between workers through object storage (prefix `render-cache/`)."""
    preload: int = 500
    """Entries of the shared tier a synthesize worker loads into memory at start."""
    prefix: str = "render-cache/"
    """Object key prefix of the shared tier, in the audio bucket."""


@dataclass(frozen=True)
class StorageSettings(SettingsGroup):
    """How the sink stores audio: links, retries, the stale-request timeout, retention."""

    at_least_one: ClassVar[tuple[str, ...]] = ("storage_retries", "sink_stale_s")
    presign_expiry_s: int = 3600
    """Seconds a presigned URL of a stored file stays valid (requests asking for one)."""
    storage_retries: int = 8
    """In-place attempts (capped exponential backoff, 0.25 s doubling to 8 s) before a
    storage failure is dead-lettered: ~32 s, covering a storage restart."""
    sink_stale_s: float = 300.0
    """A request whose next audio has not reached the sink for this long is failed visibly
    (a segment lost upstream). Raise it where the long pool can queue a request longer."""
    retention_days: int = 0
    """Stored audio and captions of every tenant are deleted by object storage after this
    many days (0: kept until deleted by hand); applied by `streamtts storage apply`."""
    tenant_retention_days: tuple[str, ...] = ()
    """Per-tenant retention, `tenant=days` (0: kept), over `retention_days`."""
    store_streamed_frames: bool = True
    """Store the frames that were streamed as the file where they join into one (mp3, wav,
    pcm, G.711): each request is encoded once. Off: the encode stage hands the sink the PCM
    and the sink encodes every file again (the behaviour before; for comparison)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.retention_days < 0:
            raise ConfigError(f"{ENV_PREFIX}RETENTION_DAYS must be ≥ 0, got {self.retention_days}")
        self.tenant_retention()  # validates the entries

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


@dataclass(frozen=True)
class DeliverySettings(SettingsGroup):
    """How stages consume and produce records: the guarantee, group liveness, where replies go."""

    processing_guarantee: Literal["at_least_once", "exactly_once"] = "at_least_once"
    """"at_least_once" (idempotent outputs, consumers dedupe) or "exactly_once" (transactions)."""
    session_timeout_s: float = 10.0
    """A consumer silent this long leaves its group and its partitions move to another:
    failover takes about this plus 1–2 s, and any pause longer than it costs the group a
    rebalance. The brokers refuse less than 6 s (measured: docs/failure-handling.md)."""
    metadata_refresh_s: float = 5.0
    """How often consumers refresh cluster metadata. A group that joined while the broker was
    recovering may have seen its source topic missing and got no partitions; the next refresh
    notices the topic and rejoins (Kafka's default, 5 minutes, left such a stage idle that long)."""
    wire_format: Literal["v1", "cloudevents"] = "cloudevents"
    """How stages write records: "cloudevents" (binary mode: audio as the record value, the
    fields as ce_ headers; JSON records gain CloudEvents headers) or "v1" (the JSON envelope,
    audio base64 inside). Readers take both (docs/wire-format.md)."""
    encode_lookahead: int = 16
    """PCM records the encode stage reads ahead, so a request's first chunk can overtake
    queued later chunks of other requests (one first and one later chunk encode side by
    side); 0 = one record at a time, as before. Exactly-once always takes one at a time."""
    reply_topic_prefix: str = "tts.reply."
    """A request's `reply_topic` must start with the topic prefix + this: no request can make
    the pipeline write into tts.results, a DLQ or another tenant's topics."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.encode_lookahead < 0:
            raise ConfigError(f"{ENV_PREFIX}ENCODE_LOOKAHEAD must be ≥ 0, got {self.encode_lookahead}")


@dataclass(frozen=True)
class OperationsSettings(SettingsGroup):
    """How a worker process is operated: probes and metrics, the canary, shutdown."""

    ops_port: int = 0
    """Port of /healthz, /readyz, /metrics (0: any free port, logged at start)."""
    canary_interval_s: float = 60.0
    """Seconds between canary runs on synthesize workers (0: only the start-up reference)."""
    shutdown_timeout_s: float = 30.0
    """SIGTERM: time to finish in-flight work, commit and flush before exiting anyway."""
    startup_timeout_s: float = 120.0
    """A worker that cannot start (its brokers unreachable, or lost mid-start) retries with
    backoff for this long, then exits non-zero with one line so its supervisor restarts it;
    /healthz fails once start-up overruns it. Covers the Kafka steps, not the model load."""
    startup_step_timeout_s: float = 20.0
    """Bound of one start-up step (a side service caught up, a stage joined): a step the
    broker's death left hanging is abandoned and the attempt retried after this long."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.ops_port <= 65535:
            raise ConfigError(f"{ENV_PREFIX}OPS_PORT must be 0–65535, got {self.ops_port}")
        if self.startup_step_timeout_s <= 0 or self.startup_timeout_s < self.startup_step_timeout_s:
            raise ConfigError(
                f"{ENV_PREFIX}STARTUP_TIMEOUT_S ({self.startup_timeout_s}) must be at least "
                f"{ENV_PREFIX}STARTUP_STEP_TIMEOUT_S ({self.startup_step_timeout_s}), which must be > 0"
            )


@dataclass(frozen=True)
class ReleaseSettings(SettingsGroup):
    """The gray release a worker serves, and its automatic rollback."""

    env_prefix: ClassVar[str] = "RELEASE_"
    name: str = _env_alias(BASE_RELEASE, "RELEASE")
    """The release a synthesize worker serves: "stable" reads tts.segments[.long] in today's
    groups; another NAME reads tts.release.NAME.segments[.long] in its own groups."""
    voices: tuple[str, ...] = ()
    """That release's voice mapping, "REQUESTED=RENDERED" each (e.g. "jm_kumo=jm_kumo:0.8+jf_alpha:0.2")."""
    guard: bool = True
    """Workers that run the segment stage also run the release guard (automatic rollback);
    off where `streamtts release guard` runs on its own."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not re.match(RELEASE_PATTERN, self.name):
            raise ConfigError(
                f"{ENV_PREFIX}RELEASE must be lower-case letters, digits and dashes (≤ 40), got {self.name!r}"
            )
        voice_map(self.voices)  # a malformed pair fails here, naming it


@dataclass(frozen=True)
class PipelineSettings:
    """Knobs of the stages, one group per concern. Defaults suit a 2-core node; environment
    variables (STREAMTTS_*) and the config file override them (`specs()` lists them all)."""

    text: TextSettings = field(default_factory=TextSettings)
    synthesis: SynthesisSettings = field(default_factory=SynthesisSettings)
    degradation: DegradationSettings = field(default_factory=DegradationSettings)
    render_cache: RenderCacheSettings = field(default_factory=RenderCacheSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    delivery: DeliverySettings = field(default_factory=DeliverySettings)
    operations: OperationsSettings = field(default_factory=OperationsSettings)
    release: ReleaseSettings = field(default_factory=ReleaseSettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PipelineSettings:
        """Every group from its STREAMTTS_* variables; unset (or empty) ones keep the default,
        except a list, which an empty variable empties."""
        environ = os.environ if environ is None else environ
        values: dict[str, dict[str, Any]] = {f.name: {} for f in fields(cls)}
        for spec in specs():
            raw = environ.get(spec.env)
            if raw is not None:
                values[spec.group][spec.name] = spec.parse(raw)
        groups = {f.name: _group_types()[f.name](**values[f.name]) for f in fields(cls)}
        return cls(**groups)

    @classmethod
    def of(cls, **flat: Any) -> PipelineSettings:
        """The defaults with some settings changed, by flat name (see `replace`)."""
        return cls().replace(**flat)

    def replace(self, **flat: Any) -> PipelineSettings:
        """These settings with some changed, by their flat names, the ones the config file's
        `[pipeline]` section and the variables use: `replace(first_max_chars=30,
        render_cache_mb=64, release="canary")`. Validated like any construction."""
        by_flat = {spec.flat: spec for spec in specs()}
        changes: dict[str, dict[str, Any]] = {}
        for key, value in flat.items():
            if key not in by_flat:
                raise TypeError(f"PipelineSettings has no setting {key!r}")
            spec = by_flat[key]
            changes.setdefault(spec.group, {})[spec.name] = value
        return dataclasses.replace(
            self, **{g: dataclasses.replace(getattr(self, g), **c) for g, c in changes.items()}
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


def specs() -> tuple[SettingSpec, ...]:
    """Every pipeline setting, group by group, in declaration order."""
    return specs_of(PipelineSettings)


def _group_types() -> Mapping[str, Any]:
    return group_types(PipelineSettings)


def _check_fields(group: Any, at_least_one: tuple[str, ...] = ()) -> None:
    check_fields(group, PipelineSettings, at_least_one)
