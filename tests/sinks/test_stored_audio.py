"""The stored file made of what was streamed: the frames subscribers got become the file where
they join into a valid one (one encode per request), and it decodes — with FFmpeg's own
demuxer, through PyAV — to exactly the request's samples, aligned as a file encoded whole."""

from __future__ import annotations

import io
import itertools

import av
import numpy as np
import pytest

from streamtts.audio.codecs import encode_chunk, encode_file, open_stream
from streamtts.schemas import RequestContext
from streamtts.schemas.chunks import FileCarries, StreamUse
from streamtts.sinks.assembler import AssembledRequest, StreamedPart
from streamtts.sinks.stored_audio import one_stream, stored_audio
from tests.factories import request

RATE = 24_000
CUTS = (0, 20_000, 50_000, 72_000)
"""Three chunks of a 3 s request, of unequal lengths."""


def _speechlike() -> np.ndarray:
    """3 s of a tone with a click at sample 1000 (to find the alignment after decoding)."""
    t = np.arange(CUTS[-1]) / RATE
    x = (0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype(np.int16)
    x[1000:1010] = 30_000
    return x


def _assembled(fmt: str, parts: list[StreamedPart], *, cancelled: bool = False) -> AssembledRequest:
    ctx = RequestContext.of(request("stored", format=fmt, sample_rate=RATE))
    return AssembledRequest(
        ctx=ctx,
        sample_rate=RATE,
        pcm=b"".join(p.audio for p in parts if p.carries == "pcm"),
        chunks=len(parts),
        degraded=[],
        records=[],
        cancelled=cancelled,
        streamed=tuple(parts),
    )


def _streamed_mp3(x: np.ndarray) -> list[StreamedPart]:
    """The parts the encode stage writes for a 3-chunk mp3 request: one stream's payloads."""
    stream = open_stream("mp3", RATE)
    assert stream is not None
    parts = []
    for i, (a, b) in enumerate(itertools.pairwise(CUTS)):
        payload = stream.feed(x[a:b]) + (stream.finish() if b == CUTS[-1] else b"")
        parts.append(StreamedPart("frames", payload, b - a, "opened" if i == 0 else "continued"))
    return parts


def _decode(data: bytes, demuxer: str) -> np.ndarray:
    with av.open(io.BytesIO(data), mode="r", format=demuxer) as container:
        return np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])


def test_an_mp3_stream_is_stored_as_its_streamed_frames_and_decodes_to_the_exact_samples() -> None:
    x = _speechlike()
    parts = _streamed_mp3(x)
    data, made_from = stored_audio(_assembled("mp3", parts))
    assert made_from == "streamed"
    streamed = b"".join(p.audio for p in parts)
    assert data.endswith(streamed) and len(data) - len(streamed) < 1_000  # one Info frame ahead
    ours, whole = _decode(data, "mp3"), _decode(encode_file(x, RATE, "mp3"), "mp3")
    # The decoder trims the delay and padding the Info frame states: the file has the
    # request's samples, no more, no fewer, where a file encoded whole has them.
    assert len(ours) == len(x) == len(whole)
    assert int(np.argmax(np.abs(ours[:6000]))) == int(np.argmax(np.abs(whole[:6000])))
    with av.open(io.BytesIO(data), mode="r", format="mp3") as container:
        assert container.duration is not None and abs(container.duration / 1e6 - 3.0) < 1e-3


@pytest.mark.parametrize("fmt", ["wav", "pcm", "mulaw", "alaw"])
def test_formats_whose_chunks_join_store_them_joined_byte_for_byte_as_a_whole_encode(fmt: str) -> None:
    x = _speechlike()
    parts = [
        StreamedPart("frames", encode_chunk(x[a:b], RATE, fmt), b - a, "alone")
        for a, b in itertools.pairwise(CUTS)
    ]
    data, made_from = stored_audio(_assembled(fmt, parts))
    assert made_from == "streamed"
    assert data == encode_file(x, RATE, fmt)


@pytest.mark.parametrize("fmt", ["opus", "flac"])
def test_formats_whose_chunks_do_not_join_are_encoded_from_the_pcm(fmt: str) -> None:
    x = _speechlike()
    parts = [
        StreamedPart("pcm", x[a:b].astype("<i2").tobytes(), b - a, None) for a, b in itertools.pairwise(CUTS)
    ]
    data, made_from = stored_audio(_assembled(fmt, parts))
    assert made_from == "pcm"
    assert data == encode_file(x, RATE, fmt)


def test_a_stream_reopened_mid_request_is_decoded_and_encoded_again_to_the_exact_length() -> None:
    x = _speechlike()
    first = open_stream("mp3", RATE)
    second = open_stream("mp3", RATE)
    assert first is not None and second is not None
    # A failover after chunk 0: its stream never finished; chunk 1 opened another.
    parts = [
        StreamedPart("frames", first.feed(x[: CUTS[1]]), CUTS[1], "opened"),
        StreamedPart("frames", second.feed(x[CUTS[1] : CUTS[2]]), CUTS[2] - CUTS[1], "reopened"),
        StreamedPart("frames", second.feed(x[CUTS[2] :]) + second.finish(), CUTS[3] - CUTS[2], "continued"),
    ]
    data, made_from = stored_audio(_assembled("mp3", parts))
    assert made_from == "decoded"
    assert len(_decode(data, "mp3")) == len(x)


def test_a_cancelled_streams_frames_are_decoded_not_joined() -> None:
    """A cancel ends the stream without flushing the encoder: its frames are not whole."""
    x = _speechlike()
    stream = open_stream("mp3", RATE)
    assert stream is not None
    parts = [StreamedPart("frames", stream.feed(x[: CUTS[1]]), CUTS[1], "opened")]
    parts.append(StreamedPart("none", b"", 0, None))  # the cancel marker
    data, made_from = stored_audio(_assembled("mp3", parts, cancelled=True))
    assert made_from == "decoded"
    assert len(_decode(data, "mp3")) == CUTS[1]


@pytest.mark.parametrize(
    ("uses", "expected"),
    [
        (["alone"], True),
        (["opened", "continued", "continued"], True),
        (["opened", "reopened", "continued"], False),
        (["continued", "continued"], False),
        (["alone", "alone"], False),
        ([], False),
    ],
)
def test_one_stream(uses: list[StreamUse], expected: bool) -> None:
    carries: FileCarries = "frames"
    assert one_stream([StreamedPart(carries, b"x", 1, use) for use in uses]) is expected
