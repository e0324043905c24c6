"""The open streamed utterances of a segment stage: what each has received, what is still
held unspoken, and where its spoken spans stand (seq, sentence, text offset).

An utterance's state is a small value (`Utterance.to_bytes`): the stage writes it to the
compacted changelog `tts.utterances` after every change, in the same producer (and, under
exactly-once, the same transaction) as the segments it cut, and reads it back when it is
assigned a partition — so a worker killed mid-utterance hands the next owner exactly the
text not yet spoken. Pure: no Kafka here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import orjson

from streamtts.processors.segment.text_cutting import CutPolicy, Force
from streamtts.schemas.request import MAX_SEGMENTS, TTSRequest
from streamtts.schemas.utterance import EndReason, TextDelta


@dataclass(frozen=True)
class Piece:
    """A stretch of the utterance's text to plan and speak now."""

    text: str
    start: int
    """Where it starts in the utterance's text (word timestamps map back to it)."""
    final: bool
    """The utterance's last piece: its last segment ends the request."""


@dataclass(frozen=True)
class Utterance:
    """One open streamed utterance."""

    request: TTSRequest
    """The opening request, its `text` emptied (the text lives in `held` and the spans)."""
    held: str = ""
    """Received, not yet spoken."""
    spoken: int = 0
    """Characters of the utterance's text cut into spans so far (where `held` starts)."""
    seq: int = 0
    """The next segment's seq."""
    sentence: int = 0
    """The next segment's sentence index."""
    deltas: int = 0
    """Deltas taken."""
    topic: str = ""
    """The segments topic its spans go to (its pool's, or its release's lane)."""
    release: str | None = None
    """The release lane it was routed to when it opened (all its segments go there)."""
    lexicon_version: int | None = None
    """The lexicon version it opened with (every span is said with the same one)."""
    held_since: float | None = None
    """When (epoch s) the oldest unspoken text arrived: the buffer timer counts from it."""
    last_delta_at: float = 0.0
    """When (epoch s) it last received a delta: the idle timer counts from it."""
    ended: EndReason | None = None
    carried: tuple[tuple[str, str], ...] = ()
    """Headers its opening record carried (its trace): every span's records carry them."""
    applied: int = -1
    """The offset (on its `tts.requests` partition) of the last record applied to it. A
    record at or below it was applied already: redelivered after a crash (its state was
    saved, its offset not yet committed), it is skipped, so no text is taken twice."""

    @property
    def received(self) -> int:
        return self.spoken + len(self.held)

    @property
    def first(self) -> bool:
        """Nothing spoken yet: the next span is the first (the latency-critical one)."""
        return self.seq == 0

    def to_bytes(self) -> bytes:
        state = asdict(self)
        state["request"] = self.request.to_dict()
        return orjson.dumps(state)

    def headers(self) -> list[tuple[str, bytes]]:
        return [(k, v.encode("latin-1")) for k, v in self.carried]

    @classmethod
    def from_bytes(cls, value: bytes) -> Utterance:
        state: dict[str, Any] = orjson.loads(value)
        state["request"] = TTSRequest.from_obj(state["request"])
        state["carried"] = tuple((k, v) for k, v in state.get("carried", ()))
        return cls(**state)


class UtteranceLimit(ValueError):
    """A delta would take an utterance past its bounds (deltas, text)."""

    reason = "utterance_too_long"


def opened(
    request: TTSRequest,
    now: float,
    *,
    offset: int,
    topic: str,
    release: str | None,
    lexicon_version: int | None,
    carried: list[tuple[str, bytes]],
) -> Utterance:
    """The utterance a streamed request opens (its text is the first delta's)."""
    return Utterance(
        carried=tuple((k, v.decode("latin-1")) for k, v in carried),
        applied=offset,
        request=request.model_copy(update={"text": ""}),
        held=request.text,
        topic=topic,
        release=release,
        lexicon_version=lexicon_version,
        held_since=now if request.text else None,
        last_delta_at=now,
    )


def taken(
    utterance: Utterance,
    delta: TextDelta,
    now: float,
    *,
    offset: int,
    max_deltas: int,
    max_chars: int,
) -> Utterance:
    """`utterance` with `delta`'s text appended.

    Raises:
        UtteranceLimit: the delta would pass `max_deltas` or `max_chars` of text (nothing is
            appended: the caller ends the utterance with what it has).
    """
    if utterance.seq >= MAX_SEGMENTS - 100:
        raise UtteranceLimit(f"an utterance makes at most {MAX_SEGMENTS} segments")
    if utterance.deltas + 1 > max_deltas:
        raise UtteranceLimit(f"an utterance takes at most {max_deltas} deltas")
    if utterance.received + len(delta.delta) > max_chars:
        raise UtteranceLimit(f"an utterance's text is at most {max_chars} characters")
    held_since = utterance.held_since
    if delta.delta and (held_since is None or not utterance.held):
        held_since = now
    return replace(
        utterance,
        held=utterance.held + delta.delta,
        deltas=utterance.deltas + 1,
        held_since=held_since,
        last_delta_at=now,
        applied=offset,
    )


def cut(utterance: Utterance, policy: CutPolicy, force: Force, now: float) -> tuple[Utterance, Piece | None]:
    """The piece to speak now (None: wait), and the utterance after it. With `force` "all"
    and the utterance ended, the piece is final even when empty (it ends the request)."""
    n = policy.cut(utterance.held, first=utterance.first, force=force)
    final = utterance.ended is not None and n == len(utterance.held)
    if n == 0 and not final:
        # The timer found no whole word to speak: it waits another delay, not a busy loop.
        return (replace(utterance, held_since=now) if force == "words" else utterance), None
    piece = Piece(utterance.held[:n], utterance.spoken, final)
    rest = utterance.held[n:]
    after = replace(utterance, held=rest, spoken=utterance.spoken + n, held_since=now if rest else None)
    return after, piece


def spoke(utterance: Utterance, segments: int, sentences: int) -> Utterance:
    """`utterance` after a piece became `segments` segments over `sentences` sentences."""
    return replace(utterance, seq=utterance.seq + segments, sentence=utterance.sentence + sentences)


def deadline(utterance: Utterance, policy: CutPolicy, idle_s: float) -> tuple[float, Force | None]:
    """When (epoch s) its timer fires and what for: "words" (held text waited its delay) or
    None (idle: the utterance ends)."""
    idle_at = utterance.last_delta_at + idle_s
    delay = policy.delay_ms(utterance.first)
    if utterance.held and utterance.held_since is not None and delay is not None:
        buffer_at = utterance.held_since + delay / 1000
        if buffer_at < idle_at:
            return buffer_at, "words"
    return idle_at, None
