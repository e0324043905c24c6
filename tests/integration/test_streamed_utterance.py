"""A streamed utterance (an LLM's reply, token by token) is one request downstream: spoken
from its first clause on, before the text is complete; one run of seqs ending in `last`; word
timestamps continuous over the whole text and mapped back to it; bounded and closed when its
writer vanishes. In memory (the real stages' handlers and model) and on the real broker."""

from __future__ import annotations

import re
import uuid

import pytest

from streamtts.processors.in_memory import InMemoryTopology
from streamtts.schemas import PcmChunk, Segment, TextDelta, TTSRequest, wire
from streamtts.schemas.dead_letter import DeadLetter
from streamtts.schemas.headers import header_pairs
from streamtts.schemas.request import MAX_SEGMENTS

pytestmark = [pytest.mark.model]

REPLY = (
    "Thanks for calling, I can help with that. Your order shipped on Monday, "
    "and it should arrive by Thursday. Is there anything else?"
)


def tokens(text: str) -> list[str]:
    """Roughly as an LLM streams English: a word with its leading space, punctuation apart."""
    return re.findall(r"\s*[\w']+|\s*[^\w\s]", text)


def opener(rid: str, **kw: object) -> TTSRequest:
    fields: dict[str, object] = {
        "request_id": rid,
        "voice": "en_joe",
        "language": "en",
        "format": "pcm",
        "cache": False,
        "timestamps": True,
        "stream": {"max_buffer_delay_ms": 0},
    }
    fields.update(kw)
    return TTSRequest.new("", **fields)


def segments_of(memory: InMemoryTopology, rid: str) -> list[Segment]:
    return [
        wire.decode(Segment, r.value, header_pairs(r.headers))
        for r in memory.records(memory.topics.segments, rid)
    ]


async def test_an_utterance_streamed_token_by_token_is_one_request_spoken_early(speech_renderer) -> None:
    rid = f"utt-{uuid.uuid4().hex[:8]}"
    async with InMemoryTopology(speech_renderer) as memory:
        await memory.submit(opener(rid))
        await memory.run()
        sent = ""
        first_spoken_at: int | None = None
        for token in tokens(REPLY):
            await memory.submit_delta(TextDelta(request_id=rid, delta=token))
            sent += token
            await memory.run()
            if first_spoken_at is None and memory.pcm(rid):
                first_spoken_at = len(sent)
        assert first_spoken_at is not None, "nothing was spoken before the end"
        # The first clause ("Thanks for calling,") is spoken once the next word shows the
        # comma is one, long before the first sentence ends.
        assert first_spoken_at <= len("Thanks for calling, I"), sent[:first_spoken_at]
        await memory.submit_delta(TextDelta(request_id=rid, end=True))
        await memory.run()

        segments = segments_of(memory, rid)
        pcm: list[PcmChunk] = memory.pcm(rid)
        utterance_segments = memory.records(memory.topics.utterances, rid)
        dead = [r for stage in memory.stages for r in memory.records(memory.topics.dlq(stage.name), rid)]
    assert not dead, [DeadLetter.from_record(r.key, r.value, r.headers).reason for r in dead]
    # One request downstream: seqs 0..n-1, `last` only on the final one, which knows the total.
    seqs = [s.seq for s in segments]
    assert seqs == list(range(len(segments))) and len(segments) >= 3
    assert [s.last for s in segments] == [False] * (len(segments) - 1) + [True]
    assert segments[-1].total == len(segments)
    assert all(s.total == MAX_SEGMENTS for s in segments[:-1])
    # Every word of the text is spoken, once, in order: the spans' texts rebuild the reply.
    spoken = " ".join(s.text for s in segments if s.text)
    assert re.sub(r"\s+", " ", spoken).strip() == REPLY
    # Word timestamps are continuous over the whole utterance and mapped back to its text.
    words = [w for c in pcm for w in (c.words or [])]
    assert len(words) >= 20
    for w in words:
        assert REPLY[w.char_start : w.char_end] == w.text, w
    assert [w.char_start for w in words] == sorted(w.char_start for w in words)
    assert all(b.start_ms >= a.start_ms for a, b in zip(words, words[1:], strict=False))
    assert sum(len(c.pcm) for c in pcm) / 2 / 22050 > 4.0  # real speech, seconds of it
    # The state was kept on the changelog after every change and deleted at the end.
    assert utterance_segments and utterance_segments[-1].value is None


async def test_deltas_for_no_open_utterance_and_past_the_bounds_are_dead_lettered(speech_renderer) -> None:
    rid = f"utt-{uuid.uuid4().hex[:8]}"
    async with InMemoryTopology(speech_renderer) as memory:
        await memory.submit_delta(TextDelta(request_id=rid, delta="Hello there. "))
        await memory.run()
        letters = [
            DeadLetter.from_record(r.key, r.value, r.headers).reason
            for r in memory.records(memory.topics.dlq("segment"), rid)
        ]
        assert letters == ["unknown_utterance"]
