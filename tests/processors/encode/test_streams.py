"""A request's mp3 chunks come from one continuous encoder: one gapless stream, every payload
still decodable alone; and the stream bookkeeping of the encode stage."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamtts.audio.codecs import decode_audio, encode_chunk, open_stream
from streamtts.processors.encode.stage import encode_pcm_chunk
from streamtts.processors.encode.streams import OpenStreams
from streamtts.schemas import PcmChunk
from tests.factories import pcm_chunk, request

RATE = 24_000
LAME_DELAY = 1105
"""Samples of encoder + decoder delay at the start of an MP3 stream without a LAME tag."""
FRAME = 576
"""Samples per MPEG-2 layer III frame (≤ 24 kHz)."""


def _tone(seconds: float) -> np.ndarray:
    """One continuous tone with a slow swell: a boundary gap or jump shows as error."""
    t = np.arange(int(RATE * seconds)) / RATE
    return (0.4 * np.sin(2 * np.pi * 300 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 2 * t)) * 32767).astype("<i2")


def _chunks(fmt: str, samples: np.ndarray, cuts: list[int]) -> list[PcmChunk]:
    req = request(format=fmt)
    bounds = [0, *cuts, len(samples)]
    total = len(bounds) - 1
    return [pcm_chunk(req, i, total, pcm=samples[a:b]) for i, (a, b) in enumerate(itertools.pairwise(bounds))]


def _snr_db(reference: np.ndarray, decoded: np.ndarray) -> float:
    ref = reference.astype(np.float64) / 32768.0
    out = decoded[: len(ref)].astype(np.float64)
    if len(out) < len(ref):
        out = np.pad(out, (0, len(ref) - len(out)))
    return float(10 * np.log10(np.sum(ref**2) / max(np.sum((ref - out) ** 2), 1e-12)))


def test_a_requests_mp3_chunks_join_into_one_gapless_stream() -> None:
    tone = _tone(3.0)
    chunks = _chunks("mp3", tone, [10_000, 37_000, 52_000])
    streams = OpenStreams()
    payloads = [encode_pcm_chunk(c, None, streams.step(c)).audio for c in chunks]
    decoded, rate = decode_audio(b"".join(payloads), "mp3")
    assert rate == RATE
    # One encoder delay at the start and less than a frame of padding at the end, whatever
    # the number of chunks.
    assert LAME_DELAY <= len(decoded) - len(tone) < LAME_DELAY + FRAME
    assert _snr_db(tone, decoded[LAME_DELAY:]) > 20
    assert len(streams) == 0, "the last chunk ends the stream"
    # Chunks encoded alone (what a stream replaces): a delay and padding at every boundary,
    # so the same comparison fails.
    alone = b"".join(encode_chunk(np.frombuffer(c.pcm, "<i2"), RATE, "mp3") for c in chunks)
    decoded_alone, _ = decode_audio(alone, "mp3")
    assert len(decoded_alone) - len(tone) > 3 * LAME_DELAY
    assert _snr_db(tone, decoded_alone[LAME_DELAY:]) < 5


def test_every_stream_payload_decodes_alone() -> None:
    chunks = _chunks("mp3", _tone(2.0), [20_000])
    streams = OpenStreams()
    for chunk in chunks:
        payload = encode_pcm_chunk(chunk, None, streams.step(chunk)).audio
        samples, _ = decode_audio(payload, "mp3")
        assert len(samples) >= FRAME


def test_the_stream_bookkeeping_follows_the_requests_chunks() -> None:
    streams = OpenStreams()
    req = request(format="mp3")
    one = pcm_chunk(request(format="mp3"), 0, 1, samples=2400)
    assert streams.step(one) is None, "a one-chunk request is encoded alone"
    first, second = (pcm_chunk(req, 0, 3, part=p, last_part=p == 1, samples=2400) for p in (0, 1))
    steps = [streams.step(first), streams.step(second)]
    assert [s.use if s else None for s in steps] == ["opened", "continued"]
    assert steps[0] is not None and steps[1] is not None and steps[0].encoder is steps[1].encoder
    # The next chunk expected is (1, 0): (2, 0) means one went missing here.
    skipped = streams.step(pcm_chunk(req, 2, 3, samples=2400))
    assert skipped is not None and skipped.use == "reopened" and skipped.final
    assert len(streams) == 0
    # Mid-request without a stream (a restart): a new one; a cancel marker drops it.
    other = request(format="mp3")
    assert (step := streams.step(pcm_chunk(other, 1, 3, samples=2400))) is not None and step.use == "reopened"
    cancel = pcm_chunk(other, 2, 3, samples=0).model_copy(update={"cancelled": True})
    assert streams.step(cancel) is None and len(streams) == 0
    # A chunk still in flight after the cancel is encoded alone, not as a reopened stream.
    assert streams.step(pcm_chunk(other, 1, 3, part=1, last_part=False, samples=2400)) is None


@pytest.mark.parametrize(("fmt", "rate"), [("opus", RATE), ("flac", RATE), ("pcm", RATE), ("mp3", 20_000)])
def test_formats_and_rates_without_a_stream_encode_alone(fmt: str, rate: int) -> None:
    assert open_stream(fmt, rate) is None
    chunk = pcm_chunk(request(format=fmt), 0, 2, samples=2400, sample_rate=rate)
    assert OpenStreams().step(chunk) is None


def test_open_streams_are_bounded() -> None:
    streams = OpenStreams(max_open=3)
    reqs = [request(format="mp3") for _ in range(5)]
    for req in reqs:
        streams.step(pcm_chunk(req, 0, 2, samples=2400))
    assert len(streams) == 3
    # The oldest was dropped: its next chunk opens a new stream; the newest continues.
    oldest = streams.step(pcm_chunk(reqs[0], 1, 2, samples=2400))
    newest = streams.step(pcm_chunk(reqs[-1], 1, 2, samples=2400))
    assert oldest is not None and oldest.use == "reopened"
    assert newest is not None and newest.use == "continued"


def test_a_stream_not_fed_for_idle_s_is_dropped() -> None:
    now = [0.0]
    streams = OpenStreams(idle_s=60.0, clock=lambda: now[0])
    stalled, going = request(format="mp3"), request(format="mp3")
    streams.step(pcm_chunk(stalled, 0, 3, samples=2400))
    now[0] = 50.0
    streams.step(pcm_chunk(going, 0, 3, samples=2400))
    now[0] = 100.0  # the stalled stream was last fed 100 s ago, the other 50 s ago
    step = streams.step(pcm_chunk(going, 1, 3, samples=2400))
    assert step is not None and step.use == "continued"
    assert len(streams) == 1, "the stalled request's stream was dropped"
    late = streams.step(pcm_chunk(stalled, 1, 3, samples=2400))
    assert late is not None and late.use == "reopened"
