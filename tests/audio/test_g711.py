"""G.711 (telephony): our companding against FFmpeg's own decoders, and the formats built on it."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from streamtts.audio import formats
from streamtts.audio.codecs import assemble, decode_audio, encode_chunk, encode_file
from streamtts.audio.g711 import alaw_to_linear, linear_to_alaw, linear_to_mulaw, mulaw_to_linear
from streamtts.audio.wav import wav_data
from streamtts.schemas import ContractError, TTSRequest

CODECS = [("mulaw", linear_to_mulaw, mulaw_to_linear), ("alaw", linear_to_alaw, alaw_to_linear)]


def _ffmpeg_decode(data: bytes, fmt: str) -> np.ndarray:
    with av.open(io.BytesIO(data), format=fmt, options={"sample_rate": "8000"}) as container:
        return np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])


@pytest.mark.parametrize(("fmt", "encode", "decode"), CODECS)
def test_every_code_decodes_as_ffmpeg_decodes_it(fmt, encode, decode) -> None:  # type: ignore[no-untyped-def]
    codes = bytes(range(256))
    assert np.array_equal(decode(codes), _ffmpeg_decode(codes, fmt))
    back = encode(decode(codes))
    # Every code round-trips (μ-law has two zeros, 0x7F and 0xFF: either is right).
    assert sum(a != b for a, b in zip(back, codes, strict=True)) <= (1 if fmt == "mulaw" else 0)


@pytest.mark.parametrize(("fmt", "encode", "decode"), CODECS)
def test_encoding_picks_the_nearest_level(fmt, encode, decode) -> None:  # type: ignore[no-untyped-def]
    x = np.arange(-32768, 32768, dtype=np.int32).astype(np.int16)
    y = decode(encode(x)).astype(np.int64)
    levels = np.unique(decode(bytes(range(256))).astype(np.int64))
    nearest = levels[np.abs(levels[None, :] - x[::257, None].astype(np.int64)).argmin(axis=1)]
    assert np.array_equal(np.abs(y[::257] - x[::257]), np.abs(nearest - x[::257]))
    assert np.sign(y[np.abs(x) > 64]).tolist() == np.sign(x[np.abs(x) > 64]).tolist()


def test_raw_and_wav_g711_payloads_are_what_ffmpeg_calls_pcm_mulaw_and_pcm_alaw() -> None:
    t = np.arange(8000) / 8000
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    for fmt in ("mulaw", "alaw"):
        raw = encode_chunk(tone, 8000, fmt)
        assert len(raw) == 8000  # one byte a sample
        samples, rate = decode_audio(raw, fmt, sample_rate=8000)
        assert rate == 8000 and np.max(np.abs(samples - tone)) < 0.02
        wav = encode_chunk(tone, 8000, "wav", codec=fmt)
        with av.open(io.BytesIO(wav), format="wav") as container:
            stream = container.streams.audio[0]
            assert stream.codec_context.name == f"pcm_{fmt}" and stream.rate == 8000
        decoded, rate = decode_audio(wav, "wav")
        assert rate == 8000 and np.max(np.abs(decoded - tone)) < 0.02
        # Chunks join under one header without a decode: the same bytes as one file.
        halves = [
            encode_chunk(tone[:4000], 8000, "wav", codec=fmt),
            encode_chunk(tone[4000:], 8000, "wav", codec=fmt),
        ]
        assert assemble(halves, "wav") == encode_file(tone, 8000, "wav", codec=fmt)
        assert wav_data(assemble(halves, "wav"))[2] == raw
        assert assemble([raw[:4000], raw[4000:]], fmt) == raw
    assert formats.get("mulaw").content_type == "audio/basic"
    assert formats.get("alaw").content_type == "audio/x-alaw-basic"


def test_g711_requests_default_to_8_khz() -> None:
    assert TTSRequest.new("hi", format="mulaw").sample_rate == 8000
    assert TTSRequest.new("hi", format="alaw", sample_rate=16000).sample_rate == 16000
    assert TTSRequest.new("hi", format="wav", codec="alaw").sample_rate == 8000
    assert TTSRequest.new("hi", format="wav").sample_rate == 24000
    assert TTSRequest.new("hi", format="mp3", sample_rate=None).sample_rate == 24000
    with pytest.raises(ContractError, match="codec 'mulaw' is for wav"):
        TTSRequest.new("hi", format="mp3", codec="mulaw")
