"""Prometheus metrics of one worker process, in a registry it owns (no global state).

Latency buckets bracket the 1.2 s P99 target finely so alerts and SLO panels can read it.
The latency histograms (first audio, end to end, per stage record) are `TracedHistogram`s: an
observation inside a sampled span carries its trace id as an exemplar (`runtime.exemplars`).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from streamtts.runtime.exemplars import TracedHistogram, negotiated
from streamtts.runtime.tracing import Tracing

LATENCY_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)
STAGE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
RTF_BUCKETS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0)
BYTES_BUCKETS = (1e3, 4e3, 16e3, 64e3, 128e3, 256e3, 512e3, 1e6)
BREAKER_STATES = {"closed": 0, "half_open": 1, "open": 2}


class Telemetry:
    def __init__(self, tracing: Tracing | None = None) -> None:
        self.tracing = tracing or Tracing.off()
        """The process's spans (see `runtime.tracing`); off unless an OTLP endpoint is set."""
        r = self.registry = CollectorRegistry()
        self.e2e_latency = TracedHistogram(
            "streamtts_request_latency_seconds",
            "Request created_at → completion result published",
            ["format"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.ttfa = TracedHistogram(
            "streamtts_time_to_first_audio_seconds",
            "Request created_at → first audio chunk published",
            ["format"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.stage_seconds = TracedHistogram(
            "streamtts_stage_seconds",
            "Processing time of one record in a stage",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.rtf = Histogram(
            "streamtts_synthesis_rtf",
            "Synthesis real-time factor (compute s / audio s)",
            ["voice"],
            buckets=RTF_BUCKETS,
            registry=r,
        )
        self.lane_wait = Histogram(
            "streamtts_synth_lane_wait_seconds",
            "Time a span waited for an inference lane (first spans vs bulk work)",
            ["lane"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.preemptions = Counter(
            "streamtts_synth_preemptions", "Bulk runs stopped to give a lane to a first span", registry=r
        )
        self.preempted_compute = Counter(
            "streamtts_synth_preempted_compute_seconds",
            "Model compute thrown away by preemptions (the stopped calls)",
            registry=r,
        )
        self.predicted_first_wait = Gauge(
            "streamtts_synth_predicted_first_wait_seconds",
            "Predicted wait of a first span submitted now (what admission reads)",
            registry=r,
        )
        self.cost_error = Histogram(
            "streamtts_synth_cost_ratio",
            "Measured / predicted compute of a span (the cost model's error)",
            ["engine"],
            buckets=(0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0),
            registry=r,
        )
        self.cost_slope = Gauge(
            "streamtts_synth_cost_ms_per_phoneme",
            "The cost model's fitted compute per phoneme",
            ["engine"],
            registry=r,
        )
        cache_kinds = (
            ("hits", "Spans served"),
            ("misses", "Lookups that found nothing"),
            ("bytes", "Bytes stored"),
            ("evictions", "Entries evicted"),
        )
        self.render_cache = {
            kind: Counter(f"streamtts_render_cache_{kind}", f"Render cache: {doc}", ["tier"], registry=r)
            for kind, doc in cache_kinds
        }
        self.audio_seconds = Counter(
            "streamtts_audio_seconds", "Audio produced (seconds)", ["voice"], registry=r
        )
        self.chunk_bytes = Histogram(
            "streamtts_chunk_bytes", "Encoded audio chunk size", ["format"], buckets=BYTES_BUCKETS, registry=r
        )
        self.records = Counter("streamtts_records", "Records processed", ["stage", "outcome"], registry=r)
        self.cancelled_segments = Counter(
            "streamtts_cancelled_segments", "Segments skipped because their request was cancelled", registry=r
        )
        self.requests_completed = Counter(
            "streamtts_requests_completed", "Completion results published", ["status"], registry=r
        )
        self.inflight = Gauge("streamtts_inflight", "Records being processed now", ["stage"], registry=r)
        self.pending_requests = Gauge(
            "streamtts_sink_pending_requests", "Requests the sink is assembling", registry=r
        )
        self.stored_files = Counter(
            "streamtts_stored_files",
            "Stored audio files, by how they were made: streamed (the streamed frames), pcm"
            " (encoded from PCM), decoded (streamed frames decoded and encoded again)",
            ["format", "made_from"],
            registry=r,
        )
        self.lag = Gauge(
            "streamtts_consumer_lag",
            "End offset minus committed offset",
            ["group", "topic", "partition"],
            registry=r,
        )
        self.dead_letters = Counter(
            "streamtts_dead_letters", "Records sent to a dead-letter topic", ["stage", "reason"], registry=r
        )
        self.retries = Counter(
            "streamtts_retries", "In-place retries of transient faults", ["stage", "reason"], registry=r
        )
        self.degradations = Counter(
            "streamtts_degradations", "Spans not rendered as asked", ["step", "reason", "lang"], registry=r
        )
        self.breaker_state = Gauge(
            "streamtts_breaker_state",
            "Circuit breaker per voice/lang: 0 closed, 1 half-open, 2 open",
            ["voice", "lang"],
            registry=r,
        )
        self.model_ready = Gauge("streamtts_model_ready", "1 once the model is loaded and warmed", registry=r)
        self.canary_ok = Gauge("streamtts_canary_ok", "1 while the last canary run passed", registry=r)
        self.canary_runs = Counter("streamtts_canary_runs", "Canary runs", ["outcome"], registry=r)
        # Releases (gray releases): every series names the release lane it measures.
        self.release_info = Gauge(
            "streamtts_release_info", "1 on a synthesize worker serving this release", ["release"], registry=r
        )
        self.release_routed = Counter(
            "streamtts_release_routed",
            "Requests the segment stage routed to a release",
            ["release", "why"],
            registry=r,
        )
        self.release_segments = Counter(
            "streamtts_release_segments",
            "Segments synthesized per release",
            ["release", "outcome"],
            registry=r,
        )
        self.release_requests = Counter(
            "streamtts_release_requests",
            "Completion results per release (outcome: completed, degraded, failed, cancelled)",
            ["release", "outcome"],
            registry=r,
        )
        self.release_first_audio = TracedHistogram(
            "streamtts_release_first_audio_seconds",
            "Request created_at → first audio synthesized, per release",
            ["release"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.release_rollbacks = Counter(
            "streamtts_release_rollbacks",
            "Automatic rollbacks by the release guard",
            ["release", "reason"],
            registry=r,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def exposition_for(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition a scraper's `Accept` header asks for, and its content type
        (OpenMetrics, with exemplars, or Prometheus text: see `runtime.exemplars`)."""
        return negotiated(self.registry, accept)

    def metric_names(self) -> set[str]:
        """Every series name the exposition can contain (to check dashboards and alert rules)."""
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
        names: set[str] = set()
        for family in self.registry.collect():
            names.update(family.name + s for s in suffixes.get(family.type, ("",)))
        return names
