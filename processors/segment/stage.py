"""Segment stage: tts.requests → tts.segments (faust). Logic lives in `planner`; which
release lane a request goes to, in `release_routing`."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from streamtts.errors import RecordError
from streamtts.features.lexicons.book import LexiconBook
from streamtts.features.releases.routing import Route, route
from streamtts.features.releases.watch import ReleaseWatch
from streamtts.processors.segment.exceptions import (
    LexiconVersionUnknown,
    ReplyTopicNotAllowed,
    TooCostly,
    UnknownReplyTopicError,
)
from streamtts.processors.segment.han_words import warm_han_words
from streamtts.processors.segment.langid import warm_identification
from streamtts.processors.segment.lexicon import LexiconError, LexiconMatcher
from streamtts.processors.segment.numbers_zh import warm_zh_numbers
from streamtts.processors.segment.plan_budget import PlanAbandoned, PlanDeadline
from streamtts.processors.segment.planner import is_ssml, plan_segments
from streamtts.processors.segment.segment_records import send_segments
from streamtts.processors.segment.span_limits import SpanLimits
from streamtts.processors.segment.streamed import StreamedUtterances
from streamtts.processors.segment.utterance_changelog import held_by, read_back
from streamtts.processors.segment.utterances import opened
from streamtts.processors.segment.voice_plan import VoiceChooser
from streamtts.runtime.faust_stage import FaustStage, source_of
from streamtts.runtime.jsonlog import log_event, snippet
from streamtts.runtime.kafka import topic_partitions
from streamtts.runtime.stage_outputs import Transport
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.taken import Taken
from streamtts.runtime.topic_existence import TopicExistence
from streamtts.runtime.topology import GroupSpec, StageSpec
from streamtts.schemas import Lexicon, Segment, TTSRequest
from streamtts.schemas.headers import RELEASE, header
from streamtts.schemas.request import pool_of
from streamtts.schemas.trace import carried_with_trace
from streamtts.schemas.utterance import TextDelta, is_text_delta


class VoiceCatalog(VoiceChooser, Protocol):
    """What the segment stage needs of the voice registry: reject unknown voices up front and
    plan one voice per request or sentence."""

    def spec(self, voice_id: str) -> object:
        """Resolve `voice_id`; raise a `RecordError` (reason "unknown_voice") if it is not known."""
        ...


def pool_for(request: TTSRequest, long_text_chars: int) -> str:
    """ "short" or "long": priority decides first, then text length (`schemas.request.pool_of`)."""
    return pool_of(request, long_text_chars)


async def warm_segmenting() -> None:
    """Load language identification's models, jieba's dictionary and cn2an before the first record,
    in a thread. lingua holds the GIL while it loads (~5 s on 2 cores): a worker runs this
    before any stage joins its group (the spec's `warm`), so a stage started
    earlier in the same process is not starved of its heartbeats and records meanwhile."""
    await asyncio.to_thread(warm_identification)
    await asyncio.to_thread(warm_han_words)
    await asyncio.to_thread(warm_zh_numbers)


def build_stage(parts: StageParts, spec: StageSpec, group: GroupSpec) -> SegmentStage:
    """The segment stage where `spec` places it (`StageSpec.build`)."""
    pieces = {name: parts.piece(name) for name in ("voices", "lexicons", "releases")}
    return SegmentStage(parts, spec=spec, **pieces)


class SegmentStage(FaustStage):
    name = "segment"

    def __init__(
        self,
        parts: StageParts,
        *,
        voices: VoiceCatalog,
        lexicons: LexiconBook | None = None,
        releases: ReleaseWatch | None = None,
        spec: StageSpec | None = None,
    ) -> None:
        """releases: the live routing rule; None (or no rule ever written) sends everything to
        the base release's topics, as before releases existed."""
        super().__init__(parts, spec=spec)
        pipeline = parts.pipeline
        self.lexicons = lexicons
        # Compiled lexicons by (tenant, version), compiled off the event loop as soon as an
        # update arrives: the first request after it does not stall the stage.
        self._matchers: dict[tuple[str, int], asyncio.Future[LexiconMatcher | None]] = {}
        if lexicons is not None:
            lexicons.listeners.append(self._compile)
        self.releases = releases
        # The registry only resolves names here (engines load lazily, never in this stage).
        self.voices = voices
        self._topics_exist = TopicExistence(self._has_partitions)
        # Planning runs here, off the event loop, so a costly request cannot stop heartbeats,
        # SIGTERM or the side services. Two threads: one planning, one spare should a plan
        # overrun its budget where no check reaches (see `_plan`).
        self._planning = ThreadPoolExecutor(max_workers=2, thread_name_prefix="segment-plan")
        self._stopping = threading.Event()
        self.streams = StreamedUtterances(
            pipeline.text,
            self.outputs,
            self._plan_piece,
            wire_format=pipeline.delivery.wire_format,
            log=self.log,
        )
        """Open streamed utterances (text arriving as deltas), restored on assignment."""
        self._restored = asyncio.Event()
        """Set while the open utterances are those of the partitions held: cleared from a
        rebalance's start until they are read back (faust may resume fetching before its
        assignment signal reaches us: a delta handled then would find no utterance)."""
        self._restored.set()  # in memory there is no rebalance
        self.app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]  # faust stubs want a `signal=` kwarg

    async def _on_revoked(self, app: Any, revoked: Any, **kwargs: Any) -> None:
        self._restored.clear()
        self.streams.stop()  # no timer speaks for a partition while it may be changing hands

    async def start(self) -> None:
        self._restored.clear()  # until the first assignment has read the utterances back
        await super().start()

    async def stop(self) -> None:
        # 1. a plan still running ends at its next check, at once: its thread no longer
        # competes with the loop for the GIL through the stop, and the process, which exits
        # only once its threads do, is not held by it; its record waits un-acked (`_plan`);
        # 2. the agent stops (the record is redelivered to the partition's next owner).
        self._stopping.set()
        self.streams.stop()
        await super().stop()

    def send_through(self, transport: Transport) -> None:
        super().send_through(transport)
        self.streams.outputs = self.outputs

    def release(self) -> None:
        self.streams.stop()
        self._stopping.set()
        self._planning.shutdown(wait=False, cancel_futures=True)

    async def handle(self, taken: Taken[Any]) -> str | None:
        if not self._restored.is_set():
            await self._restored.wait()
        started = time.perf_counter()
        event = taken.event
        if is_text_delta(event.message.value, header(event.message.headers, "ce_type")):
            return await self._delta(event, started)
        request: TTSRequest | None = None
        try:
            request = TTSRequest.from_bytes(event.message.value)
            if request.voice != "auto":
                self.voices.spec(request.voice)  # unknown voice: permanent, before any work
            if request.delivery.reply_topic:
                await self._check_topic(request.delivery.reply_topic)
            lexicon = await self._lexicon(request)
            if request.stream is not None:
                return await self._open_stream(request, lexicon, event, started)
            segments = await self._plan(request, lexicon)
        except (RecordError, ValueError) as err:  # permanent: this record can never succeed
            return await self.dead_letter(
                source_of(event),
                err,
                request_id=request.request_id if request else None,
                tenant=request.tenant if request else None,
            )
        # Length-aware pools: interactive/short requests and long/batch ones go to separate
        # topics read by separate synthesize groups, so a chapter never delays a prompt.
        pool = pool_for(request, self.pipeline.text.long_text_chars)
        out, lane = await self._destination(request, event.message.headers, pool)
        if lane is not None:
            # Routed once per request: every segment carries the release and goes to its lane.
            segments = [_on_release(s, lane.release) for s in segments]
        carried = carried_with_trace(event.message.headers)  # every record downstream is traced
        await send_segments(self.outputs, out, segments, self.pipeline.delivery.wire_format, carried)
        self.log_record(
            "segmented",
            started,
            request,
            voice=request.voice,
            voice_planned=segments[0].voice,
            voice_scope=segments[0].voice_scope,
            lang=request.language,
            segments=len(segments),
            pool=pool,
            text_type="ssml" if is_ssml(request, self.pipeline.text.markup) else "text",
            lexicon_version=segments[0].request.lexicon_version,
            notes=segments[0].request.notes or None,
            release=lane.release if lane else None,
            routed_by=lane.why if lane else None,
            rule_version=lane.rule_version if lane else None,
            text=snippet(request.text),
        )
        return "ok"

    async def _open_stream(
        self, request: TTSRequest, lexicon: LexiconMatcher | None, event: Any, started: float
    ) -> str:
        """A streamed utterance opens: routed once (pool, release lane, lexicon version), its
        first text cut as the policy allows; its deltas follow (`_delta`)."""
        pool = "long" if request.priority == "batch" else "short"
        out, lane = await self._destination(request, event.message.headers, pool)
        utterance = opened(
            request,
            time.time(),
            offset=event.message.offset,
            topic=out,
            release=lane.release if lane else None,
            lexicon_version=lexicon.version if lexicon else None,
            carried=carried_with_trace(event.message.headers),
        )
        sent = await self.streams.begin(utterance)
        self.log_record(
            "utterance_opened",
            started,
            request,
            voice=request.voice,
            pool=pool,
            segments=sent,
            release=lane.release if lane else None,
            max_buffer_delay_ms=request.stream.max_buffer_delay_ms if request.stream else None,
            text=snippet(request.text),
        )
        return "ok"

    async def _delta(self, event: Any, started: float) -> str | None:
        """A text delta (or flush, or end) of an open utterance."""
        delta: TextDelta | None = None
        try:
            delta = TextDelta.from_bytes(event.message.value)
            sent = await self.streams.add(delta, event.message.offset)
        except (RecordError, ValueError) as err:
            return await self.dead_letter(
                source_of(event),
                err,
                request_id=delta.request_id if delta else None,
                tenant=delta.tenant if delta else None,
            )
        self.log_record(
            "delta",
            started,
            delta,
            voice=None,
            level=logging.INFO if sent or delta.end else logging.DEBUG,
            chars=len(delta.delta),
            flush=delta.flush or None,
            end=delta.end or None,
            segments=sent,
        )
        return "ok"

    async def _plan_piece(self, request: TTSRequest) -> list[Segment]:
        """A streamed piece planned as a request's text, with the utterance's lexicon version."""
        return await self._plan(request, await self._lexicon(request))

    async def assigned_partitions(self, owned: dict[str, list[int]]) -> None:
        """Open utterances follow their partitions: those of partitions gone are dropped (their
        next owner restores them), those of partitions new here are read back from the
        changelog before any of their records is handled (`utterance_changelog`)."""
        try:
            held = set(owned.get(self.topics.requests, []))
            mine = await held_by(self.kafka, self.topics.requests, held)
            self.streams.forget(mine)
            self.streams.rearm()
            if not held:
                return
            found = await read_back(self.kafka, self.topics.role("utterances"), mine, self.log)
            restored = sum(self.streams.restore(u) for u in found or [])
            log_event(self.log, "utterances_restored", restored=restored, open=len(self.streams.open))
        finally:
            self._restored.set()

    async def _destination(self, request: TTSRequest, headers: object, pool: str) -> tuple[str, Route | None]:
        """The segments topic a request's spans go to: its pool's, or a release's lane."""
        out = self.outputs.role("segments_long" if pool == "long" else "segments")
        lane = self._route(request, headers)
        if lane is not None and not await self._topic_exists(
            self.topics.release_segments(lane.release, pool)
        ):
            # A rule written by hand for a release whose lane was never created: producing
            # there would block this stage for every tenant; stable serves instead.
            log_event(
                self.log,
                "release_lane_missing",
                logging.ERROR,
                release=lane.release,
                request_id=request.request_id,
            )
            lane = None
        if (
            lane is not None
            and self.releases is not None
            and lane.release != self.releases.current.stable
            and not await self.releases.lanes.live(lane.release, pool)
        ):
            # The candidate's lane has no live consumer (crashed, never started): a request
            # sent there would wait for nobody; stable serves it and the guard rolls back.
            lane = Route(self.releases.current.stable, "no_consumer", self.releases.current.version)
        if lane is None:
            return out, None
        self.telemetry.release_routed.labels(lane.release, lane.why).inc()
        if self.releases is not None:
            self.releases.routed(request.request_id, lane.release)
        return self.outputs.lane(lane.release, pool), lane

    async def _plan(self, request: TTSRequest, lexicon: LexiconMatcher | None) -> list[Segment]:
        """`plan_segments` in the planning thread, within the request's budget.

        The planner checks its deadline once per sentence, block and span and stops there
        (TooCostly, with the position reached). Should it still not return by twice the
        budget (a step between checks that never ends), the stage stops waiting: the record
        is dead-lettered all the same and that thread ends at its next check.
        """
        text = self.pipeline.text
        budget = text.plan_budget_s

        def plan() -> list[Segment]:
            # The clock starts when planning starts, not while the record waits for a thread.
            return plan_segments(
                request,
                limits=SpanLimits.of(text),
                markup=text.markup,
                voices=self.voices,
                lexicon=lexicon,
                ssml_unknown=text.ssml_unknown,
                known_voice=self._known_voice,
                deadline=PlanDeadline.start(budget, len(request.text), stopping=self._stopping),
            )

        loop = asyncio.get_running_loop()
        if self._stopping.is_set():  # a record taken while the agent stops: left for the next owner
            await loop.create_future()
        work = loop.run_in_executor(self._planning, plan)
        try:
            return await asyncio.wait_for(asyncio.shield(work), 2 * budget)
        except PlanAbandoned:
            # The stage is stopping: no verdict on this request (neither acked nor
            # dead-lettered); wait for the agent's cancel, which follows the abandon.
            await loop.create_future()
            raise
        except TimeoutError:
            work.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no warning
            raise TooCostly(
                f"planning took longer than its budget of {budget:g} s and did not stop at a check"
            ) from None

    async def _lexicon(self, request: TTSRequest) -> LexiconMatcher | None:
        """The tenant's lexicon (the pinned version for a replay), compiled once per version."""
        if self.lexicons is None:
            if request.lexicon_version is not None:
                raise LexiconVersionUnknown("this worker reads no lexicons (tts.lexicons is not followed)")
            return None
        tenant = request.tenant
        if request.lexicon_version is not None:
            lexicon = self.lexicons.version(tenant, request.lexicon_version)
            if lexicon is None:
                raise LexiconVersionUnknown(
                    f"lexicon version {request.lexicon_version} of tenant {tenant!r} is not kept"
                )
        else:
            lexicon = self.lexicons.current(tenant)
            if lexicon is None:
                return None
        return await self._compile(lexicon)

    def _compile(self, lexicon: Lexicon) -> asyncio.Future[LexiconMatcher | None]:
        key = (lexicon.tenant, lexicon.version)
        found = self._matchers.get(key)
        if found is None:
            if len(self._matchers) > 256:
                self._matchers.clear()
            loop = asyncio.get_running_loop()
            found = self._matchers[key] = asyncio.ensure_future(
                loop.run_in_executor(None, self._matcher, lexicon)
            )
        return found

    def _matcher(self, lexicon: Lexicon) -> LexiconMatcher | None:
        try:
            return LexiconMatcher(lexicon)
        except LexiconError as err:  # refused by `lexicon put`; written around it: say so
            log_event(
                self.log, "lexicon_unusable", tenant=lexicon.tenant, version=lexicon.version, error=str(err)
            )
            return None

    def _known_voice(self, name: str) -> bool:
        try:
            self.voices.spec(name)
        except (RecordError, ValueError, KeyError):
            return False
        return True

    def _route(self, request: TTSRequest, headers: object) -> Route | None:
        if self.releases is None or not self.releases.written:
            return None
        asked = header(headers, RELEASE)
        return route(
            self.releases.current,
            request.tenant,
            request.request_id,
            asked.decode(errors="replace") if asked else None,
        )

    async def _topic_exists(self, name: str) -> bool:
        """Whether a reply topic or lane exists (remembered: see `TopicExistence`)."""
        return await self._topics_exist.exists(name)

    async def _has_partitions(self, name: str) -> bool:
        return bool(await topic_partitions(self.kafka, name))

    async def _check_topic(self, name: str) -> None:
        allowed = self.kafka.topic_prefix + self.pipeline.delivery.reply_topic_prefix
        if not name.startswith(allowed) or len(name) == len(allowed):
            raise ReplyTopicNotAllowed(f"reply topic {name!r} must start with {allowed!r}")
        if not await self._topic_exists(name):
            raise UnknownReplyTopicError(f"reply topic {name!r} does not exist")


def _on_release(segment: Segment, release: str) -> Segment:
    """The segment with its request's release set (validated values, so no re-validation)."""
    return segment.model_copy(update={"request": segment.request.model_copy(update={"release": release})})
