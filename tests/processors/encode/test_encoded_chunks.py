"""A render cache hit's PCM is encoded once: the payload is reused, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest

from streamtts.audio.codecs import decode_audio
from streamtts.processors.encode import stage as encode_stage
from streamtts.processors.encode.stage import EncodedChunks, encode_pcm_chunk
from tests.factories import pcm_chunk, request


def _tone_chunk(fmt: str, seed: int):  # type: ignore[no-untyped-def]
    chunk = pcm_chunk(request(format=fmt), 0, 1)
    t = np.arange(24_000) / 24_000
    samples = (0.3 * np.sin(2 * np.pi * (200 + seed) * t) * 32767).astype("<i2")
    return chunk.model_copy(update={"pcm": samples.tobytes()})


@pytest.mark.parametrize("fmt", ["mp3", "opus", "flac"])
def test_the_same_pcm_is_encoded_once_and_decodes_the_same(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = encode_stage.encode_chunk

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(encode_stage, "encode_chunk", counting)
    cache = EncodedChunks(1 << 20)
    first = encode_pcm_chunk(_tone_chunk(fmt, 0), cache)
    again = encode_pcm_chunk(_tone_chunk(fmt, 0), cache)
    other = encode_pcm_chunk(_tone_chunk(fmt, 50), cache)
    assert len(calls) == 2, "the repeated PCM was not encoded again"
    assert again.audio == first.audio and other.audio != first.audio
    uncached = encode_pcm_chunk(_tone_chunk(fmt, 0))
    assert uncached.audio == first.audio  # encoding is deterministic: reuse changes nothing
    samples, _ = decode_audio(again.audio, fmt)
    assert len(samples) > 0


def test_the_encoded_cache_is_bounded() -> None:
    cache = EncodedChunks(1000)
    for i in range(10):
        cache.put(bytes([i]), b"x" * 300)
    assert sum(cache.get(bytes([i])) is not None for i in range(10)) == 3
    cache.put(b"big", b"x" * 2000)
    assert cache.get(b"big") is None
