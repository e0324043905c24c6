"""The segment stage's streamed utterances: a request opened with `stream`, its text deltas,
flushes and end, and the timers that speak held text (`max_buffer_delay_ms`) or end an
utterance nobody writes to any more (`stream_idle_s`).

Each piece the cutting policy releases (`text_cutting`) is planned like a whole request's
text (the same planner, lexicon, numbers, languages) and renumbered into the utterance: seq,
sentence and text offsets continue where the last piece stopped, so downstream it is one
request. Its segments carry `total = MAX_SEGMENTS` (not yet known) until the last, which
carries the real total and `last` — an empty one when the end brought no more text.

All changes to an utterance happen under one lock (a record and a timer never interleave),
and each is followed by the state written to the changelog (`utterances`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import UTC, datetime

from streamtts.errors import RecordError
from streamtts.processors.segment.exceptions import SegmentationError
from streamtts.processors.segment.segment_records import send_segments
from streamtts.processors.segment.segmenter import PAUSE_CLAUSE_MS
from streamtts.processors.segment.splitter import CLOSERS, SENTENCE_END
from streamtts.processors.segment.text_cutting import CutPolicy, Force
from streamtts.processors.segment.utterances import (
    Piece,
    Utterance,
    UtteranceLimit,
    cut,
    deadline,
    spoke,
    taken,
)
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.pipeline_settings import TextSettings
from streamtts.runtime.stage_outputs import StageOutputs
from streamtts.schemas import Segment, wire
from streamtts.schemas.context import RequestContext
from streamtts.schemas.request import MAX_SEGMENTS, TTSRequest
from streamtts.schemas.utterance import TextDelta

MAX_ENDED = 100_000
"""Ended utterances remembered per stage (their ids and last offsets: a few MB at most)."""

PlanPiece = Callable[[TTSRequest], Awaitable[list[Segment]]]
"""Plans a piece's text as a request (the stage's planner, lexicon and budget)."""


class UnknownUtterance(RecordError, ValueError):
    """A text delta for an utterance that is not open here (never opened, or ended)."""

    reason = "unknown_utterance"


class UtteranceTooLong(RecordError, ValueError):
    """A delta past the utterance's bounds: it was ended with the text it had."""

    reason = "utterance_too_long"


@dataclass(eq=False)
class StreamedUtterances:
    """The open utterances of one segment stage, and what to do with each record or timer."""

    text: TextSettings
    outputs: StageOutputs
    plan: PlanPiece
    _: KW_ONLY
    wire_format: wire.WireFormat
    log: logging.Logger
    clock: Callable[[], float] = time.time
    open: dict[str, Utterance] = field(default_factory=dict, init=False, repr=False)
    """Open utterances by request id (those of the partitions this stage holds)."""
    ended: OrderedDict[str, int] = field(default_factory=OrderedDict, init=False, repr=False)
    """Ended utterances (the last `MAX_ENDED`) → the offset of their last record: a
    redelivered record of one is skipped, a new one refused (never a second utterance)."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)
    _alarms: dict[str, asyncio.Task[None]] = field(default_factory=dict, init=False, repr=False)

    def policy(self, utterance: Utterance) -> CutPolicy:
        options = utterance.request.stream
        assert options is not None
        return CutPolicy(
            first_min_cost=options.min_first_chars or max(1, self.text.first_min_chars),
            max_cost=self.text.max_chars,
            max_buffer_delay_ms=options.max_buffer_delay_ms,
            later_delay_ms=self.text.stream_later_delay_ms,
        )

    # -- records --------------------------------------------------------------------------

    async def begin(self, utterance: Utterance) -> int:
        """A streamed request opened `utterance`: speak what its first text allows."""
        async with self._lock:
            key = utterance.request.request_id
            if key in self.open or key in self.ended:
                return 0  # a redelivered opener: the utterance is under way, or over
            return await self._advance(utterance, "none")

    async def add(self, delta: TextDelta, offset: int) -> int:
        """A delta (at `offset` of its partition) for an open utterance; returns the segments
        it released (0 too for a record applied before: a redelivery).

        Raises:
            UnknownUtterance: none is open under its id.
            UtteranceTooLong: it would pass the bounds (the utterance ends with what it had).
        """
        async with self._lock:
            utterance = self.open.get(delta.request_id)
            last = utterance.applied if utterance is not None else self.ended.get(delta.request_id)
            if last is not None and offset <= last:
                log_event(self.log, "delta_redelivered", request_id=delta.request_id, offset=offset)
                return 0
            if utterance is None or utterance.request.tenant != delta.tenant:
                raise UnknownUtterance(
                    f"no streamed utterance {delta.request_id!r} of tenant {delta.tenant!r} is open "
                    "(never opened, or already ended)"
                )
            now = self.clock()
            try:
                after = taken(
                    utterance,
                    delta,
                    now,
                    offset=offset,
                    max_deltas=self.text.stream_max_deltas,
                    max_chars=self.text.max_text_chars,
                )
            except UtteranceLimit as err:
                await self._advance(replace(utterance, ended="limit", applied=offset), "all")
                raise UtteranceTooLong(str(err)) from None
            if delta.end:
                after = replace(after, ended=delta.ended or "client")
            force: Force = "all" if delta.end or delta.flush else "none"
            return await self._advance(after, force)

    # -- timers ---------------------------------------------------------------------------

    def _arm(self, utterance: Utterance) -> None:
        key = utterance.request.request_id
        alarm = self._alarms.pop(key, None)
        if alarm is not None and alarm is not asyncio.current_task():
            alarm.cancel()
        if utterance.ended is not None:
            return
        at, force = deadline(utterance, self.policy(utterance), self.text.stream_idle_s)
        self._alarms[key] = asyncio.create_task(self._ring(key, at, force), name=f"utterance-{key}")

    async def _ring(self, key: str, at: float, force: Force | None) -> None:
        await asyncio.sleep(max(0.0, at - self.clock()))
        async with self._lock:
            utterance = self.open.get(key)
            if utterance is None:
                return
            try:
                if force is None:
                    log_event(self.log, "utterance_idle", request_id=key, idle_s=self.text.stream_idle_s)
                    await self._advance(replace(utterance, ended="idle"), "all")
                else:
                    await self._advance(utterance, force)
            except Exception as err:  # a timer must never die silently: it tries again in a second
                log_event(
                    self.log, "utterance_timer_failed", logging.ERROR, request_id=key, error=str(err)[:300]
                )
                retry = asyncio.create_task(
                    self._ring(key, self.clock() + 1.0, force), name=f"utterance-{key}"
                )
                self._alarms[key] = retry

    def stop(self) -> None:
        """Cancel every timer (the partitions' next owner restores the utterances)."""
        for alarm in self._alarms.values():
            alarm.cancel()
        self._alarms.clear()

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drop the utterances (and timers) `keep` says are no longer this stage's."""
        for key in [k for k in self.open if not keep(k)]:
            self.open.pop(key, None)
            alarm = self._alarms.pop(key, None)
            if alarm is not None:
                alarm.cancel()

    def rearm(self) -> None:
        """Every open utterance's timer running again (after a rebalance stopped them)."""
        for utterance in self.open.values():
            self._arm(utterance)

    def restore(self, utterance: Utterance) -> bool:
        """An utterance read back from the changelog: open here, its timer running (or,
        ended, remembered as such). False if this stage holds it already."""
        key = utterance.request.request_id
        if key in self.open or key in self.ended:
            return False
        if utterance.ended is not None and not utterance.held:
            self._remember_ended(utterance)
            return False
        self.open[key] = utterance
        self._arm(utterance)
        return True

    # -- speaking -------------------------------------------------------------------------

    async def _advance(self, utterance: Utterance, force: Force) -> int:
        """Cut and speak what the policy releases, save the state, re-arm the timer."""
        key = utterance.request.request_id
        policy = self.policy(utterance)
        now = self.clock()
        sent = 0
        if utterance.ended is not None:
            force = "all"
        while True:
            utterance, piece = cut(utterance, policy, force, now)
            if piece is None:
                break
            utterance, n = await self._speak(utterance, piece)
            sent += n
            if piece.final or not utterance.held:
                break
            force = "none" if force == "words" else force  # the timer releases one span
        done = utterance.ended is not None and not utterance.held
        await self._save(key, utterance)
        if done:
            self.open.pop(key, None)
            self._remember_ended(utterance)
            alarm = self._alarms.pop(key, None)
            if alarm is not None and alarm is not asyncio.current_task():
                alarm.cancel()
            log_event(
                self.log,
                "utterance_ended",
                request_id=key,
                tenant=utterance.request.tenant,
                ended=utterance.ended,
                chars=utterance.spoken,
                deltas=utterance.deltas,
                segments=utterance.seq,
            )
        else:
            self.open[key] = utterance
            self._arm(utterance)
        return sent

    async def _speak(self, utterance: Utterance, piece: Piece) -> tuple[Utterance, int]:
        request = utterance.request.model_copy(
            update={"text": piece.text, "lexicon_version": utterance.lexicon_version}
        )
        planned: list[Segment] = []
        if piece.text.strip():
            try:
                planned = await self.plan(request)
            except SegmentationError as err:
                # Punctuation alone, or text nobody can say: a streamed piece may be that.
                log_event(
                    self.log,
                    "piece_unspoken",
                    request_id=request.request_id,
                    reason=getattr(err, "reason", type(err).__name__),
                )
        segments = renumbered(planned, utterance, piece)
        await send_segments(self.outputs, utterance.topic, segments, self.wire_format, utterance.headers())
        # The next piece's sentence: the one after this piece's last, or the same one where
        # the piece was cut at a clause.
        following = max((s.sentence_index for s in segments), default=utterance.sentence - 1) + 1
        if segments and not segments[-1].ends_sentence:
            following -= 1
        return spoke(utterance, len(segments), following - utterance.sentence), len(segments)

    async def _save(self, key: str, utterance: Utterance) -> None:
        """The utterance's state on the changelog (once it ended, its last: `ended` set). The
        topic is compacted and keeps an hour: an ended utterance's record outlives any
        redelivery of its records, then goes."""
        await self.outputs.send(self.outputs.role("utterances"), key.encode(), utterance.to_bytes(), None)

    def _remember_ended(self, utterance: Utterance) -> None:
        self.ended[utterance.request.request_id] = utterance.applied
        self.ended.move_to_end(utterance.request.request_id)
        while len(self.ended) > MAX_ENDED:
            self.ended.popitem(last=False)


def renumbered(planned: list[Segment], utterance: Utterance, piece: Piece) -> list[Segment]:
    """A piece's segments as the utterance's: seq, sentence and text offsets continued; the
    total unknown (MAX_SEGMENTS) but on the final piece, whose last segment ends the request
    (an empty one if the piece had nothing to say)."""
    base_seq, base_sentence, shift = utterance.seq, utterance.sentence, piece.start
    if piece.final and not planned:
        return [_end_marker(utterance)]
    total = base_seq + len(planned) if piece.final else MAX_SEGMENTS
    mid_sentence = not piece.final and not _ends_sentence(piece.text)
    out: list[Segment] = []
    for i, segment in enumerate(planned):
        fields = segment.model_dump()
        seq = base_seq + segment.seq
        fields.update(
            seq=seq,
            total=total,
            last=seq == total - 1,
            sentence_index=base_sentence + segment.sentence_index,
            source_start=segment.source_start + shift,
        )
        if mid_sentence and i == len(planned) - 1:
            # Cut at a clause: the sentence goes on in the next piece, after a clause's breath.
            fields.update(
                ends_sentence=False, pause_after_ms=PAUSE_CLAUSE_MS if segment.pause_after_ms else 0
            )
        if utterance.release is not None:
            fields["request"]["release"] = utterance.release
        if seq == total - 1:
            fields["request"]["ended"] = utterance.ended
        if segment.text_map is not None:
            fields["text_map"] = [(s, e, a + shift, b + shift) for s, e, a, b in segment.text_map]
        out.append(Segment.model_validate(fields))
    return out


def _ends_sentence(text: str) -> bool:
    """Whether a piece ends a sentence (its last mark is a sentence end), not a clause."""
    stripped = text.rstrip()
    while stripped and stripped[-1] in CLOSERS:
        stripped = stripped[:-1]
    return bool(stripped) and (stripped[-1] in SENTENCE_END or stripped[-1] in ".!?")


def _end_marker(utterance: Utterance) -> Segment:
    """The last segment of an utterance whose end brought no text: no speech, only the end."""
    request = utterance.request
    return Segment(
        request_id=request.request_id,
        seq=utterance.seq,
        total=utterance.seq + 1,
        last=True,
        text="",
        lang="other",
        sentence_index=utterance.sentence,
        request=RequestContext.of(request, lexicon_version=utterance.lexicon_version).model_copy(
            update={"release": utterance.release, "ended": utterance.ended}
        ),
        segmented_at=datetime.now(UTC),
    )
