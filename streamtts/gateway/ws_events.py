"""The WebSocket session's JSON events for one sentence's audio, built from its chunks and the
session clock (pure: no socket, no queue). Times in `words` and `marks` count from the
sentence's start; `session_offset_ms` places the sentence on the session clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from streamtts.gateway.delivery import words_heard
from streamtts.gateway.request_state import RequestState
from streamtts.schemas import AudioChunk, WordTiming

Event = dict[str, Any]


def sentence_base(request_id: str, context: str = "") -> Event:
    """The fields every event of one sentence carries: its request, its index in the session
    and, if it was opened in a named one, its context (`ws_contexts`)."""
    base: Event = {"request_id": request_id, "index": int(request_id.rsplit("-", 1)[1])}
    if context:
        base["context_id"] = context
    return base


def degraded_event(base: Event, chunk: AudioChunk) -> Event:
    assert chunk.degradation is not None
    return {"type": "degraded", **base, "degradation": chunk.degradation.model_dump(mode="json")}


def words_event(base: Event, chunk: AudioChunk, sentence_ms: float, session_ms: float) -> Event:
    """The chunk's words, timed from the sentence's start: the chunk's place in what this
    session received (`session_offset_ms` + `offset_ms`) is exact."""
    assert chunk.words is not None
    return {
        **_about(chunk, "words", base),
        "offset_ms": round(sentence_ms, 1),
        "session_offset_ms": round(session_ms, 1),
        "words": _shifted(chunk.words, sentence_ms - (chunk.offset_ms or 0.0)),
    }


def marks_event(base: Event, chunk: AudioChunk, sentence_ms: float, session_ms: float) -> Event:
    shift = sentence_ms - (chunk.offset_ms or 0.0)
    return {
        **_about(chunk, "marks", base),
        "session_offset_ms": round(session_ms, 1),
        "marks": [{"name": m.name, "time_ms": round(m.time_ms + shift, 1)} for m in chunk.marks or ()],
    }


def chunk_event(base: Event, chunk: AudioChunk) -> Event:
    """The header of a chunk's binary frame, which follows it."""
    return {
        **_about(chunk, "chunk", base),
        "last": chunk.last,
        "format": chunk.format,
        "sample_rate": chunk.sample_rate,
        "duration_ms": round(chunk.duration_ms, 1),
        "bytes": len(chunk.audio),
    }


def completed_event(base: Event, state: RequestState, trace_id: str | None = None) -> Event:
    """A sentence done; `trace_id`: its trace, where its spans are recorded (the page links it)."""
    return {
        "type": "completed",
        **base,
        "duration_ms": round(state.audio_ms, 1),
        "chunks": len([c for c in state.chunks if not c.cancelled]),
        "cancelled": any(c.cancelled for c in state.chunks),
        **({"trace_id": trace_id} if trace_id else {}),
    }


def heard_entry(
    state: RequestState, spoken_ms: float, start_ms: float | None, *, timestamps: bool, context: str = ""
) -> tuple[Event, list[Event]]:
    """What a cancel reports of one cut sentence: its entry in `requests` (spoken_ms and, with
    timestamps, the words heard timed from the sentence), and those words on the session
    clock (for the event's `words_spoken`)."""
    words = words_heard(state.chunks, spoken_ms) if spoken_ms > 0 else None
    if words is None and timestamps:
        words = []
    entry: Event = {**sentence_base(state.request_id, context), "spoken_ms": round(spoken_ms, 1)}
    on_session: list[Event] = []
    if words is not None:
        entry["words_spoken"] = [w.model_dump() for w in words]
        on_session = _shifted(words, start_ms or 0.0)
    return entry, on_session


def heard_report(
    cut: Sequence[RequestState],
    heard: Sequence[float],
    starts_ms: Mapping[str, float],
    context_of: Callable[[str], str],
    *,
    timestamps: bool,
) -> tuple[list[Event], list[Event]]:
    """A cancel's `requests` (one `heard_entry` per cut sentence, `heard` ms of each) and its
    `words_spoken` on the session clock."""
    requests: list[Event] = []
    words_spoken: list[Event] = []
    for state, spoken in zip(cut, heard, strict=True):
        start = starts_ms.get(state.request_id)
        entry, words = heard_entry(
            state, spoken, start, timestamps=timestamps, context=context_of(state.request_id)
        )
        requests.append(entry)
        words_spoken += words
    return requests, words_spoken


def _about(chunk: AudioChunk, kind: str, base: Event) -> Event:
    """The fields an event about one chunk starts with."""
    return {"type": kind, **base, "seq": chunk.seq, "part": chunk.part}


def _shifted(words: list[WordTiming], by_ms: float) -> list[Event]:
    """`words` as event fields, their times moved by `by_ms`."""
    return [
        {**w.model_dump(), "start_ms": round(w.start_ms + by_ms, 1), "end_ms": round(w.end_ms + by_ms, 1)}
        for w in words
    ]
