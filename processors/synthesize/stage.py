"""Synthesize stage: tts.segments → tts.pcm (faust).

Inference is CPU-bound, so it runs in a bounded executor: the event loop keeps heartbeating
while the model works, and because the agent awaits each segment, a busy worker stops
pulling from its (bounded) stream buffer — back-pressure instead of an unbounded queue.
One agent per process keeps each request's segments in order; scale out with processes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from faust.types import EventT

from streamtts.features.control.cancel_watch import CancelWatch
from streamtts.features.releases.profile import ReleaseProfile
from streamtts.processors.synthesize.chunker import cancelled_marker, pcm_chunks
from streamtts.processors.synthesize.cost_model import family
from streamtts.processors.synthesize.lanes import InferenceLanes, LaneStats
from streamtts.processors.synthesize.registry import voice_class
from streamtts.processors.synthesize.renderer import NOTHING_CACHED, CacheLookup, SegmentRenderer
from streamtts.processors.synthesize.span_plan import planned_voice
from streamtts.processors.synthesize.timeline import RequestTimeline, published_audio_ms
from streamtts.runtime.faust_stage import FaustStage, source_of
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.taken import ReadAhead, Taken
from streamtts.runtime.telemetry import BREAKER_STATES
from streamtts.runtime.topology import GroupSpec, StageSpec
from streamtts.schemas import ContractError, PcmChunk, Segment, wire
from streamtts.schemas.headers import FIRST_SEGMENT, carried_headers, header

TIMELINE_RECOVERY_S = 5.0
"""Longest a worker spends recovering a request's timeline from tts.pcm after a takeover."""


@dataclass(frozen=True)
class Read:
    """A segment as the reading loop made it: decoded, the release profile applied, and (a
    first segment, with the render cache on) looked up in the cache."""

    segment: Segment
    found: CacheLookup = NOTHING_CACHED


def build_stage(parts: StageParts, spec: StageSpec, group: GroupSpec) -> SynthesizeStage:
    """The synthesize stage's group serving `group.pool`, where `spec` places it
    (`StageSpec.build`); the process's model is loaded before it is built."""
    renderer = parts.piece("model")
    if renderer is None:
        raise RuntimeError("the synthesize stage needs the model loaded before it is built")
    return SynthesizeStage(
        parts,
        renderer,
        pool=group.pool or "short",
        cancels=parts.piece("cancels"),
        profile=parts.piece("release_profile"),
        lanes=parts.piece("lanes"),
        spec=spec,
    )


class SynthesizeStage(FaustStage):
    name = "synthesize"

    def __init__(
        self,
        parts: StageParts,
        renderer: SegmentRenderer,
        *,
        pool: str = "short",
        cancels: CancelWatch | None = None,
        profile: ReleaseProfile | None = None,
        lanes: InferenceLanes | None = None,
        spec: StageSpec | None = None,
    ) -> None:
        """lanes: the process's inference lanes (first spans never wait for bulk work);
        None: the stage's own executor, one segment at a time (`scheduler = "fifo"`).
        pool: "short" reads tts.segments (group streamtts-synthesize), "long" reads
        tts.segments.long (group streamtts-synthesize-long). cancels: segments of cancelled
        requests are skipped (a marker instead of audio). profile: the release served; a
        release other than "stable" reads its own lane, tts.release.NAME.segments[.long], in
        group streamtts-synthesize-release-NAME[-long], and maps voices as it says."""
        if pool not in ("short", "long"):
            raise ValueError(f"pool must be short or long, not {pool!r}")
        self.profile = profile or ReleaseProfile()
        # Group and source (the release's lane of the pool's topic) as the topology says.
        super().__init__(parts, spec=spec, pool=pool, release=self.profile.name)
        pipeline = parts.pipeline
        self.pool_name = pool
        self.renderer = renderer
        self.out = self.outputs.role(self.spec.outputs[0])  # its one output: the topology wires it
        self.pool = ThreadPoolExecutor(
            max_workers=max(1, pipeline.synthesis.workers), thread_name_prefix=f"synth-{pool}"
        )
        # Cached first spans are looked up here, not in the model's executor: a hit is
        # streamed at once even while the model is busy with another request's inference.
        self.lookup_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"synth-{pool}-cache")
        self._timeline = RequestTimeline()
        self.cancels = cancels
        self.lanes = lanes

    def read_ahead(self) -> ReadAhead:
        """A bounded first-segments-first queue ahead of the model (the load report counts
        its first spans: a new first span queues behind them). With lanes, up to
        `lanes.first_capacity` first spans and `lanes.slots` bulk spans at once, one per
        request (its segments are published in order); without, one segment at a time."""
        capacity = max(1, self.pipeline.synthesis.lookahead)
        if self.lanes is None:
            return ReadAhead(capacity, {True: 1, False: 1}, total=1)
        return ReadAhead(capacity, {True: self.lanes.first_capacity, False: self.lanes.slots})

    async def take(self, event: EventT) -> Taken[Read]:
        """Decode the segment; a first segment the render cache has is handled at once.

        The lookup is done inline in the reading loop: the request's later segments are read
        only after this one is published, so its order holds without any bookkeeping. On a
        miss the plan the lookup made waits with the record for the model path (`handle`),
        which neither decodes nor plans it again.
        """
        try:
            segment = self.profile.apply(Segment.from_bytes(event.message.value))
        except ContractError as err:
            return Taken(event, error=err, now=True)
        first = header(event.message.headers, FIRST_SEGMENT) is not None
        if not first or self.renderer.synth.cache is None or not segment.text:
            return Taken(event, Read(segment), first=first)
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(self.lookup_pool, self.renderer.look_up, segment)
        except Exception as err:  # a lookup bug must not stop the stage: the model path remains
            log_event(self.log, "cache_lookup_failed", logging.WARNING, error=str(err)[:200])
            found = NOTHING_CACHED
        return Taken(event, Read(segment, found), first=True, now=found.rendered is not None)

    def firsts_waiting(self) -> int:
        """First spans read ahead, not yet handed to the model (`ReportsLoad`: admission)."""
        return self.waiting.firsts() if self.waiting is not None else 0

    def _engine_of(self, segment: Segment) -> str:
        """The engine that will speak the segment (for the cost model), best effort."""
        registry = self.renderer.synth.registry
        try:
            voice = planned_voice(segment)
            return (registry.spec(voice) if voice else registry.base_voice(segment.lang)).engine
        except Exception:  # an unknown voice: the render degrades; any guess will do here
            return "kokoro"

    async def handle(self, taken: Taken[Read]) -> str | None:
        started = time.perf_counter()
        event = taken.event
        if taken.value is None:
            self.telemetry.release_segments.labels(self.profile.name, "dead_lettered").inc()
            return await self.dead_letter(source_of(event), taken.error or ValueError("unreadable segment"))
        # Decoded, the release profile applied and looked up in the cache already (`take`).
        segment, found = taken.value.segment, taken.value.found
        if self._cancelled(segment):  # before any work: no inference for it
            return await self._skip(segment, event, started)
        if not segment.text:  # a streamed utterance's end with nothing more to say
            return await self._skip(segment, event, started, cancelled=False)
        loop = asyncio.get_running_loop()
        lane: LaneStats | None = None
        try:
            rendered = found.rendered
            if rendered is None:
                # A lookup's plan is reused: the voice is resolved and G2P runs once per span.
                render = partial(self.renderer.render, segment, found.plan)
                if self.lanes is None:
                    rendered = await loop.run_in_executor(self.pool, render)
                else:
                    ran = await self.lanes.run(
                        render,
                        first=segment.seq == 0,
                        engine=self._engine_of(segment),
                        chars=len(segment.text),
                        phonemes=len(found.plan.phonemes) if found.plan is not None else None,
                    )
                    rendered, lane = ran.value, ran.stats
                    self._lane_metrics(lane)
            if self._cancelled(segment):  # cancelled while it was spoken: abandon at this span
                return await self._skip(segment, event, started)
            ctx = segment.request
            offset = await self._segment_start(segment) if ctx.timestamps or ctx.marks else None
            chunks = pcm_chunks(segment, rendered, self.pipeline.synthesis.chunk_max_ms, offset)
        except Exception as err:  # a bug, not bad input: dead-letter, keep the stage flowing
            self.telemetry.release_segments.labels(self.profile.name, "dead_lettered").inc()
            return await self.dead_letter(
                source_of(event), err, request_id=segment.request_id, tenant=segment.request.tenant
            )
        key = segment.request_id.encode()
        carried = carried_headers(event.message.headers)
        for chunk in chunks:
            await self._send_pcm(key, carried, chunk)
        audio_s = len(rendered.samples) / rendered.sample_rate
        if offset is not None:
            self._timeline.advance(segment, offset, sum(c.duration_ms for c in chunks))
        t = self.telemetry
        voice_label = voice_class(rendered.voice_used)
        t.audio_seconds.labels(voice_label).inc(audio_s)
        if audio_s and not rendered.degradation:
            t.rtf.labels(voice_label).observe(rendered.synth_ms / 1000 / audio_s)
        if rendered.degradation:
            d = rendered.degradation
            t.degradations.labels(d.step, d.reason, d.lang).inc()
        t.release_segments.labels(self.profile.name, "degraded" if rendered.degradation else "ok").inc()
        for (voice, lang), state in self.renderer.breaker.states().items():
            t.breaker_state.labels(voice, lang).set(BREAKER_STATES[state])
        self.log_record(
            "synthesized",
            started,
            segment.request,
            voice=rendered.voice_used,
            pool=self.pool_name,
            release=self.profile.name,
            seq=segment.seq,
            total=segment.total,
            lang=segment.lang,
            audio_s=round(audio_s, 3),
            parts=len(chunks),
            rtf=round(rendered.synth_ms / 1000 / audio_s, 3) if audio_s else None,
            cpu_ms=round(rendered.cpu_ms, 1),
            degraded=rendered.degradation.reason if rendered.degradation else None,
            cache=rendered.cache,
            **_lane_fields(lane),
        )
        return "degraded" if rendered.degradation else "ok"

    def _lane_metrics(self, lane: LaneStats) -> None:
        assert self.lanes is not None
        t = self.telemetry
        t.lane_wait.labels(lane.lane).observe(lane.waited_ms / 1000)
        if lane.preemptions:
            t.preemptions.inc(lane.preemptions)
            t.preempted_compute.inc(lane.wasted_ms / 1000)
        if lane.predicted_ms > 0:
            t.cost_error.labels(family(lane.engine)).observe(
                (lane.run_ms - lane.wasted_ms) / lane.predicted_ms
            )
        t.predicted_first_wait.set(self.lanes.predicted_first_wait_ms() / 1000)
        for engine, fit in self.lanes.cost.snapshot().items():
            t.cost_slope.labels(engine).set(fit["ms_per_phoneme"])

    def _cancelled(self, segment: Segment) -> bool:
        return (
            self.cancels is not None
            and self.cancels.cancelled(segment.request.tenant, segment.request_id) is not None
        )

    async def _skip(self, segment: Segment, event: EventT, started: float, *, cancelled: bool = True) -> str:
        """A cancelled request's segment (or an empty one): its marker goes out instead of audio."""
        cancel = (
            self.cancels.cancelled(segment.request.tenant, segment.request_id)
            if cancelled and self.cancels
            else None
        )
        marker = cancelled_marker(segment, cancel.played_ms if cancel else None, cancelled=cancelled)
        await self._send_pcm(segment.request_id.encode(), carried_headers(event.message.headers), marker)
        if not cancelled:
            return "ok"
        self.telemetry.cancelled_segments.inc()
        self.log_record(
            "segment_cancelled",
            started,
            segment.request,
            voice=segment.voice,
            seq=segment.seq,
        )
        return "cancelled"

    async def _send_pcm(self, key: bytes, carried: list[tuple[str, bytes]], chunk: PcmChunk) -> None:
        """One PCM record (audio or a marker) to this stage's output: the input record's carried
        headers first, then the record's own."""
        record = wire.encode(chunk, self.pipeline.delivery.wire_format)
        await self.outputs.send(self.out, key, record.value, [*carried, *record.headers] or None)

    async def _segment_start(self, segment: Segment) -> float:
        """Where the segment starts in its request's audio (see `timeline`)."""
        start = self._timeline.start_of(segment)
        if start is not None:
            return start
        try:
            # Bounded: a replayed old request would otherwise scan days of PCM inline.
            start = await asyncio.wait_for(
                published_audio_ms(self.kafka, self.topics.pcm, segment, segment.request.created_at),
                TIMELINE_RECOVERY_S,
            )
        except Exception as err:  # Kafka trouble or too far back: words stay right within the span
            log_event(self.log, "timeline_recovery_failed", logging.WARNING, error=str(err)[:200])
            start = None
        log_event(
            self.log,
            "timeline_recovered" if start is not None else "timeline_unknown",
            logging.INFO if start is not None else logging.WARNING,
            request_id=segment.request_id,
            seq=segment.seq,
            start_ms=round(start, 1) if start is not None else None,
        )
        # Unknown: times count from this segment; the sink re-times stored captions from
        # each chunk's own offset, so only this live stream is shifted.
        return start if start is not None else 0.0

    def release(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.lookup_pool.shutdown(wait=True, cancel_futures=True)


def _lane_fields(lane: LaneStats | None) -> dict[str, Any]:
    """The scheduler's view of a span, for the synthesize log line (checkable decisions)."""
    if lane is None:
        return {}
    return {
        "lane": lane.lane,
        "predicted_ms": round(lane.predicted_ms, 1),
        "lane_wait_ms": round(lane.waited_ms, 1),
        "lane_run_ms": round(lane.run_ms, 1),
        "preemptions": lane.preemptions,
        "wasted_ms": round(lane.wasted_ms, 1),
    }
