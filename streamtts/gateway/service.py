"""The gateway's working parts, owned by the app (`app.state.gateway`), and request submission."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol

from opentelemetry.trace import SpanKind

from streamtts.features.admission.view import Admission
from streamtts.features.audit.log import AuditLog
from streamtts.gateway import stored_files
from streamtts.gateway.audit_trail import ThrottledAudit
from streamtts.gateway.auth import ApiKeys
from streamtts.gateway.errors import ApiError
from streamtts.gateway.fanout import Fanout
from streamtts.gateway.heard_results import HeardResults
from streamtts.gateway.keyring import KeyRing
from streamtts.gateway.metrics import GatewayMetrics
from streamtts.gateway.networks import Network, parse_networks
from streamtts.gateway.ratelimit import RateLimiter
from streamtts.gateway.request_state import RequestState
from streamtts.gateway.settings import GatewaySettings, RateLimit
from streamtts.gateway.speech_options import SpeechOptions
from streamtts.gateway.voices import VoiceCatalog
from streamtts.producers.request_producer import RequestProducer
from streamtts.runtime.broker_watch import BrokerWatch
from streamtts.runtime.lifecycle import cancel_and_wait
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import Settings
from streamtts.runtime.tracing import Tracing
from streamtts.schemas import ContractError, ControlMessage, TTSRequest
from streamtts.schemas.trace import TraceContext, parse_traceparent
from streamtts.schemas.utterance import EndReason, TextDelta
from streamtts.sinks.object_store import ObjectStore

MISS_MEMORY_S = 10.0
"""A search that found nothing is answered from memory for this long (polling an id that is not
there yet, or never will be, costs one search per 10 s, not one per poll)."""
MISS_MEMORY_ENTRIES = 10_000


BROKER_RETRY_AFTER_S = 5
"""Retry-After of a request refused while no broker answers: a restart or failover of the
brokers takes seconds."""
UNAUTHENTICATED_CLIENTS = 50
"""The shared budget of unauthenticated audit events is this many clients' worth."""


class _Part(Protocol):
    """A working part with a lifetime: started in `Gateway.start`, stopped in `stop`."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


@dataclass
class Gateway:
    settings: GatewaySettings
    pipeline: Settings
    metrics: GatewayMetrics
    keys: ApiKeys
    limiter: RateLimiter
    voices: VoiceCatalog
    producer: RequestProducer
    fanout: Fanout
    store: ObjectStore
    audit: ThrottledAudit
    heard: HeardResults
    """Corrects the result of a request a cancel cut short (see `gateway.heard_results`)."""
    admission: Admission
    """The synthesize workers' load reports: a request with a deadline they cannot meet is refused."""
    broker: BrokerWatch
    """Whether a Kafka broker answers now: new requests are refused at once while none does."""
    trusted_proxies: tuple[Network, ...] = ()
    """Peers whose X-Forwarded-For is believed (see clientaddr)."""
    tracing: Tracing = field(default_factory=Tracing.off)
    """The gateway's spans (its submit, each request's first audio), in each request's trace."""
    started_at: float = field(default_factory=time.monotonic)
    _key_reloader: asyncio.Task[None] | None = field(default=None, init=False)
    ws_tenant_sessions: dict[str, int] = field(default_factory=dict)
    """Open WebSocket sessions per tenant (the per-tenant cap); their sum is `ws_sessions`."""
    lookup_limiter: RateLimiter = field(init=False)
    """Per tenant: searches of the results history (cache misses)."""
    pipeline_summary: tuple[float, dict[str, Any]] | None = None
    """The last /v1/pipeline answer and when it was computed."""
    pipeline_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    misses: OrderedDict[tuple[str, str], float] = field(default_factory=OrderedDict)
    """(tenant, id) → when a search found nothing: not searched again for a while."""

    def __post_init__(self) -> None:
        self.lookup_limiter = RateLimiter(lambda _tenant: self.settings.lookup_rate)
        self.fanout.on_cancel = self._cancel_seen

    @property
    def ws_sessions(self) -> int:
        """Open WebSocket sessions, all tenants (the global cap)."""
        return sum(self.ws_tenant_sessions.values())

    @classmethod
    def build(cls, settings: GatewaySettings, pipeline: Settings) -> Gateway:
        metrics = GatewayMetrics(hash_tenants=settings.hash_tenant_labels)
        return cls(
            settings=settings,
            pipeline=pipeline,
            metrics=metrics,
            keys=ApiKeys(KeyRing.from_settings(settings)),
            limiter=RateLimiter(settings.rate_for),
            voices=VoiceCatalog.load(),
            producer=RequestProducer(pipeline.kafka, sample_ratio=pipeline.tracing.sample_ratio),
            fanout=Fanout(
                pipeline.kafka,
                metrics,
                entries=settings.cache_entries,
                max_bytes=settings.cache_max_bytes,
                ttl_s=settings.cache_ttl_s,
                history_lookback_s=settings.history_lookback_s,
            ),
            store=ObjectStore(pipeline.s3),
            audit=ThrottledAudit(
                AuditLog(pipeline.kafka, metrics.registry, queue_size=settings.audit_queue),
                per_client=settings.unauthenticated_audit_rate,
                overall=RateLimit(
                    settings.unauthenticated_audit_rate.per_s * UNAUTHENTICATED_CLIENTS,
                    settings.unauthenticated_audit_rate.burst * UNAUTHENTICATED_CLIENTS,
                ),
                on_suppressed=metrics.audit_suppressed.inc,
            ),
            heard=HeardResults(pipeline.kafka, wait_s=max(60.0, settings.request_timeout_s)),
            # The pool rule needs the segment stage's length threshold (the same environment).
            admission=Admission(pipeline.kafka, PipelineSettings.from_env().text.long_text_chars),
            broker=BrokerWatch(pipeline.kafka),
            trusted_proxies=parse_networks(settings.trusted_proxies, "STREAMTTS_GATEWAY_TRUSTED_PROXIES"),
            tracing=Tracing.to(pipeline.tracing, "gateway"),
        )

    @property
    def _parts(self) -> tuple[_Part, ...]:
        """The working parts in start order: 1. the audit trail, so every later action (even a
        refused one) is recorded; the broker watch never fails (it probes in the background);
        2. the fan-out attaches to the output topics before anything is submitted. They stop
        in reverse: the audit trail last, so sessions closing during shutdown are recorded."""
        return (self.audit, self.broker, self.fanout, self.producer, self.heard, self.admission)

    async def start(self) -> None:
        async with contextlib.AsyncExitStack() as started:
            for part in self._parts:
                await part.start()
                started.push_async_callback(part.stop)  # if a later part fails to start
            started.pop_all()  # all up: `stop` stops them
        if self.keys.ring.path is not None:
            self._key_reloader = asyncio.create_task(self._reload_keys(), name="keys-reload")

    async def stop(self) -> None:
        await cancel_and_wait(self._key_reloader)
        for part in reversed(self._parts):
            await part.stop()
        await asyncio.to_thread(self.tracing.shutdown)  # the last spans out

    async def _reload_keys(self) -> None:
        while True:
            await asyncio.sleep(self.settings.keys_reload_s)
            try:
                outcome = await asyncio.to_thread(self.keys.ring.reload_if_changed)
            except Exception:  # the loop must survive anything, or rotation silently stops
                logging.getLogger(__name__).exception("keys reload failed")
                continue
            if outcome != "unchanged":
                self.metrics.key_reloads.labels(outcome).inc()

    def rate_limit(self, tenant: str) -> None:
        wait_s = self.limiter.take(tenant)
        if wait_s > 0:
            raise self._too_many("rate_limited", f"tenant {tenant!r} is over its request rate", wait_s)

    def _too_many(self, counter: str, message: str, wait_s: float) -> ApiError:
        self.metrics.rejected.labels(counter).inc()
        return ApiError(
            429,
            "rate_limited",
            f"{message}; retry in {wait_s:.1f} s",
            {"Retry-After": str(max(1, round(wait_s + 0.5)))},
        )

    def admit(self, request: TTSRequest) -> None:
        """429 `overloaded` for a request whose deadline the workers' queue cannot meet: a
        clear refusal now rather than audio too late to use."""
        refusal = self.admission.check(request, self.voices.engine(request.voice))
        if refusal is None:
            return
        self.metrics.rejected.labels("overloaded").inc()
        raise ApiError(
            429,
            refusal.reason,
            refusal.message(),
            {"Retry-After": str(max(1, round(refusal.retry_after_s + 0.5)))},
        )

    def check_text(self, text: str, *, streamed: bool = False) -> None:
        if len(text) > self.settings.max_text_chars:
            self.metrics.rejected.labels("text_too_long").inc()
            raise ApiError(
                413,
                "text_too_long",
                f"text is {len(text)} characters; the limit is {self.settings.max_text_chars}",
            )
        if not text and not streamed:
            # Whitespace-only or unspeakable text is the segment stage's call (dead-lettered,
            # reported as a failed status): one definition of "speakable", not two.
            raise ApiError(400, "invalid_request", "text must not be empty")

    async def submit(
        self,
        tenant: str,
        opts: SpeechOptions,
        *,
        endpoint: str,
        request_id: str | None = None,
        trace: TraceContext | None = None,
    ) -> RequestState:
        """Validate, register with the fan-out, then put the request on `tts.requests`.
        trace: the caller's (its `traceparent`), continued by every record of the request;
        None: the request starts a trace (its `traceparent` is on the state either way)."""
        self.check_text(opts.text, streamed=opts.stream is not None)
        voice = self.voices.check(opts.voice)
        try:
            request = opts.to_request(tenant, voice, presign=self.settings.presign, request_id=request_id)
        except ContractError as err:
            raise ApiError(400, "invalid_request", str(err)) from None
        self.rate_limit(tenant)
        self.admit(request)
        held = self.fanout.get(request.request_id)
        if held is not None and (held.tenant != tenant or not held.terminal):
            # Ids are the caller's to choose; state is kept by id, so one in use is refused
            # rather than mixed with another request's audio (or another tenant's).
            raise ApiError(409, "conflict", f"request id {request.request_id[:128]!r} is in use")
        self.check_brokers()
        state = self.fanout.track(request.request_id, tenant, request.format, expects_result=opts.storage)
        submitted_ns = time.time_ns()
        attributes = {"streamtts.endpoint": endpoint, "streamtts.request_id": request.request_id}
        with self.tracing.span(
            f"gateway {endpoint}",
            parent_headers=trace.headers() if trace else None,
            kind=SpanKind.SERVER,
            attributes=attributes,
        ):
            # The request's records are children of this span (with tracing off: of the
            # caller's, or of a trace of its own); the span is the submit (queued, acked).
            trace = (
                Tracing.current()
                or trace
                or TraceContext.start(sample_ratio=self.pipeline.tracing.sample_ratio)
            )
            state.traceparent = trace.traceparent
            if self.tracing.recording:
                state.on_first_chunk = partial(self._audio_span, "first", trace, submitted_ns, attributes)
                state.on_last_chunk = partial(
                    self._audio_span, "last", trace, submitted_ns, attributes, state
                )
            try:
                await self.producer.submit(request, trace=trace)
            except Exception as err:
                self.fanout.forget(request.request_id)
                raise ApiError(
                    503,
                    "unavailable",
                    f"could not queue the request ({type(err).__name__})",
                    {"Retry-After": str(BROKER_RETRY_AFTER_S)},
                ) from None
        self.metrics.submitted.labels(endpoint, self.metrics.tenant_label(tenant)).inc()
        return state

    async def send_delta(
        self,
        state: RequestState,
        delta: str = "",
        *,
        flush: bool = False,
        end: bool = False,
        ended: EndReason | None = None,
    ) -> None:
        """More text for a streamed utterance `submit` opened (or a flush, or its end), on
        `tts.requests` behind its opening record."""
        self.check_brokers()
        message = TextDelta(
            request_id=state.request_id, tenant=state.tenant, delta=delta, flush=flush, end=end, ended=ended
        )
        try:
            await self.producer.send_delta(message)
        except Exception as err:
            raise ApiError(
                503,
                "unavailable",
                f"could not queue the text ({type(err).__name__})",
                {"Retry-After": str(BROKER_RETRY_AFTER_S)},
            ) from None

    def trace_id(self, state: RequestState) -> str | None:
        """The request's trace id when its spans are recorded (this gateway exports spans and
        the trace is sampled): what its first-audio exemplar and the page's trace link name."""
        trace = parse_traceparent(state.traceparent) if self.tracing.recording else None
        return trace.trace_id if trace is not None and trace.sampled else None

    def observe_first_audio(self, endpoint: str, state: RequestState) -> None:
        """Submit → first chunk at the gateway, with the request's trace id as its exemplar."""
        if state.first_chunk_at is None:
            return
        trace_id = self.trace_id(state)
        self.metrics.ttfa.labels(endpoint).observe(
            state.first_chunk_at - state.submitted_at, exemplar={"trace_id": trace_id} if trace_id else None
        )

    def _audio_span(
        self,
        which: Literal["first", "last"],
        trace: TraceContext,
        submitted_ns: int,
        attributes: dict[str, str],
        state: RequestState | None = None,
    ) -> None:
        """Submit → the first audio chunk at the gateway (what a caller waits for), or → the
        last one (what a whole answer takes; `streamtts.cancelled` when a barge-in cut it)."""
        now = time.time_ns()
        if state is not None and any(c.cancelled for c in state.chunks):
            attributes = {**attributes, "streamtts.cancelled": "true"}
        self.tracing.record(f"gateway {which} audio", submitted_ns, now, parent=trace, attributes=attributes)

    def check_brokers(self) -> None:
        """503 at once while no broker answers: nothing is sent that could be delivered late
        (a send held in the producer would be, after the caller gave up and retried)."""
        if not self.broker.reachable:
            raise ApiError(
                503,
                "kafka_unavailable",
                f"no Kafka broker has answered for {self.broker.down_for:.0f} s; retry later",
                {"Retry-After": str(BROKER_RETRY_AFTER_S)},
            )

    async def lookup(self, tenant: str, request_id: str) -> RequestState:
        """The tenant's request, or 404 — also for another tenant's id (no existence oracle).

        A request the cache does not hold costs a search of `tts.results`; those searches are
        rate-limited per tenant, run one at a time with a bounded waiting line, and a miss is
        remembered for a while, so a client polling made-up ids slows nobody else.
        """
        state = self.fanout.get(request_id)
        if state is None:
            state = await self._search(tenant, request_id)
            if state is None:
                await stored_files.check_expiry_marker(self.store, tenant, request_id)
        if state is None or state.tenant != tenant:
            raise ApiError(404, "not_found", f"no request {request_id[:128]!r} for this tenant")
        return state

    async def _search(self, tenant: str, request_id: str) -> RequestState | None:
        now = time.monotonic()
        missed = self.misses.get((tenant, request_id))
        if missed is not None and now - missed < MISS_MEMORY_S:
            return None
        wait_s = self.lookup_limiter.take(tenant)
        if wait_s > 0:
            message = "too many lookups of requests this gateway does not hold"
            raise self._too_many("lookup_rate_limited", message, wait_s)
        if self.fanout.history_waiting >= self.settings.history_waiters:
            self.metrics.rejected.labels("lookup_busy").inc()
            raise ApiError(
                503, "busy", "the results history is being searched; retry shortly", {"Retry-After": "1"}
            )
        state = await self.fanout.lookup(request_id)
        if state is None:
            self.misses[(tenant, request_id)] = now
            while len(self.misses) > MISS_MEMORY_ENTRIES:
                self.misses.popitem(last=False)
        return state

    async def cancel(self, state: RequestState, played_ms: float | None = None) -> bool:
        """Cancel a request of this tenant (its state came from `lookup`, so it is theirs);
        False when it had already finished and none of its audio was still being sent.

        1. Stop every live stream of it here: nothing more reaches its listeners, and what
           they were sent is now known (`state.heard_ms`).
        2. Tell the pipeline, with the heard position as `played_ms`, so the sink's result
           says what was heard; a finished request needs no cancel.
        3. Follow its result: if it says more than was heard, publish it corrected.
        """
        stopped = state.stop_deliveries(played_ms) is not None
        if not state.terminal:
            heard = state.heard_ms  # set by this cancel, or by an earlier one
            await self.producer.cancel(state.request_id, state.tenant, played_ms if heard is None else heard)
        if stopped:
            self.heard.follow(state)
        return stopped or not state.terminal

    def cut_unplayed(self, state: RequestState, heard_ms: float) -> bool:
        """A request whose audio was all written, cut at `heard_ms` while the client still
        played it: its result is corrected to what was heard (the pipeline is done with it)."""
        if not state.heard_until(heard_ms):
            return False
        self.heard.follow(state)
        return True

    def _cancel_seen(self, state: RequestState, message: ControlMessage) -> None:
        """A cancel on `tts.control` (the CLI, a client library, another gateway, this one):
        this gateway's streams of the request stop too, and its result is corrected."""
        if not any(d.live for d in state.deliveries):
            return  # nothing streaming here (or stopped already, by the cancel that sent it)
        if state.stop_deliveries(message.played_ms) is not None:
            self.heard.follow(state)
