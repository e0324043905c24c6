"""What the encode stage hands the sink for each chunk (its `FilePart` on tts.file.parts): the
very payload subscribers got where the format's payloads make the file, the PCM where they do
not, nothing for a request that stores nothing — and the chunk as PCM when it cannot be
encoded, so its request finishes at once instead of after the stale timeout."""

from __future__ import annotations

import numpy as np
import pytest

from streamtts.processors.encode.stage import EncodeStage
from streamtts.runtime.loop_record import LoopEvent, LoopRecord
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.stage_outputs import DELIVERED, Delivered
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import AudioChunk, FilePart, PcmChunk, wire
from tests.factories import pcm_chunk, request

TOPICS = TopicNames()
RATE = 24_000


class _Log:
    """The stage's transport: every record it writes, by topic."""

    def __init__(self) -> None:
        self.records: dict[str, list[LoopRecord]] = {}

    async def __call__(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None
    ) -> Delivered:
        out = self.records.setdefault(topic, [])
        out.append(LoopRecord(topic, 0, len(out), key, value, tuple(headers or ())))
        return DELIVERED

    def parts(self) -> list[FilePart]:
        return [wire.decode(FilePart, r.value, r.headers) for r in self.records.get(TOPICS.file_parts, [])]

    def audio(self) -> list[AudioChunk]:
        return [wire.decode(AudioChunk, r.value, r.headers) for r in self.records.get(TOPICS.audio, [])]


def _stage(**settings: object) -> tuple[EncodeStage, _Log]:
    stage = EncodeStage(
        StageParts.of(pipeline=PipelineSettings.of(render_cache=False, **settings), topics=TOPICS)
    )
    log = _Log()
    stage.send_through(log)
    return stage, log


async def _encode(stage: EncodeStage, chunks: list[PcmChunk]) -> None:
    for offset, chunk in enumerate(chunks):
        record = wire.encode(chunk)
        message = LoopRecord(TOPICS.pcm, 0, offset, chunk.request_id.encode(), record.value, record.headers)
        await stage.handle(await stage.take(LoopEvent(message)))


def _tone(n: int) -> np.ndarray:
    return (np.sin(np.arange(n) * 2 * np.pi * 330 / RATE) * 8000).astype(np.int16)


@pytest.mark.parametrize(
    ("fmt", "carries"),
    [("mp3", "frames"), ("wav", "frames"), ("mulaw", "frames"), ("opus", "pcm"), ("flac", "pcm")],
)
async def test_each_chunk_has_its_file_part_carrying_what_the_file_is_made_of(fmt: str, carries: str) -> None:
    req = request("Three chunks.", format=fmt, sample_rate=RATE if fmt != "mulaw" else 8000)
    rate = RATE if fmt != "mulaw" else 8000
    chunks = [pcm_chunk(req, seq, 3, pcm=_tone(rate // 2), sample_rate=rate) for seq in range(3)]
    stage, log = _stage()
    try:
        await _encode(stage, chunks)
    finally:
        stage.release()
    parts, audio = log.parts(), log.audio()
    assert [(p.seq, p.carries, p.sample_count) for p in parts] == [(s, carries, rate // 2) for s in range(3)]
    if carries == "frames":
        # The file part is the payload the subscriber got, byte for byte.
        assert [p.audio for p in parts] == [a.audio for a in audio]
        if fmt == "mp3":  # one continuous stream, opened at the first chunk
            assert [p.stream for p in parts] == ["opened", "continued", "continued"]
    else:
        assert [p.audio for p in parts] == [c.pcm for c in chunks]


async def test_two_encodes_when_the_streamed_frames_are_not_stored() -> None:
    req = request("x", format="mp3")
    stage, log = _stage(store_streamed_frames=False)
    try:
        await _encode(stage, [pcm_chunk(req, 0, 1, pcm=_tone(4800))])
    finally:
        stage.release()
    assert [p.carries for p in log.parts()] == ["pcm"]


async def test_a_request_that_stores_nothing_gets_parts_without_audio() -> None:
    req = request("x", format="mp3", delivery={"storage": False, "chunks": True})
    stage, log = _stage()
    try:
        await _encode(stage, [pcm_chunk(req, 0, 1, pcm=_tone(4800))])
    finally:
        stage.release()
    assert [(p.carries, p.audio, p.sample_count) for p in log.parts()] == [("none", b"", 4800)]
    assert len(log.audio()) == 1, "its subscribers still get the chunk"


async def test_a_chunk_that_cannot_be_encoded_still_reaches_the_sink_as_pcm() -> None:
    req = request("x", format="mp3")
    stage, log = _stage()
    chunk = pcm_chunk(req, 0, 1, pcm=_tone(4800))

    def broken(*args: object, **kw: object) -> object:
        raise ValueError("the encoder failed")

    stage.streams.step = broken  # type: ignore[method-assign]
    try:
        await _encode(stage, [chunk])
    finally:
        stage.release()
    assert [(p.carries, p.audio) for p in log.parts()] == [("pcm", chunk.pcm)]
    assert len(log.records[TOPICS.dlq("encode")]) == 1
