"""Encoders on synthetic audio (no model): round trips, chunk independence, assembly."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from streamtts.audio import formats
from streamtts.audio.codecs import assemble, decode_audio, encode_chunk, encode_file
from streamtts.audio.exceptions import DecodeError, UnknownFormatError

SR = 24_000
# MP3 chunks carry no gapless info: each decodes longer by the LAME delay (1105 samples) plus
# padding up to the next frame (576 samples at <= 24 kHz, 1152 above): <= 70 ms at 24 kHz.
TOL_S = 0.005


def mp3_chunk_slack(rate: int) -> float:
    return (1105 + (576 if rate <= 24_000 else 1152)) / rate + TOL_S


def voice_like(seconds: float, sr: int = SR, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * 180 * t) + 0.1 * np.sin(2 * np.pi * 1300 * t)
    x += 0.02 * rng.standard_normal(len(t))
    return (x * np.hanning(len(t))).astype(np.float32)


FORMATS = formats.names()


def test_the_built_in_formats_keep_their_names_types_and_extensions() -> None:
    table = {c.name: (c.content_type, c.extension, c.concatenable) for c in formats.codecs()}
    assert table == {
        "wav": ("audio/wav", ".wav", False),
        "pcm": ("audio/L16", ".pcm", True),
        "mp3": ("audio/mpeg", ".mp3", True),
        "opus": ("audio/ogg; codecs=opus", ".opus", True),
        "flac": ("audio/flac", ".flac", False),
        "mulaw": ("audio/basic", ".ulaw", True),
        "alaw": ("audio/x-alaw-basic", ".alaw", True),
    }
    assert formats.get("pcm").media_type(16000) == "audio/L16;rate=16000;channels=1;endianness=little-endian"
    assert formats.get("mp3").media_type(16000) == "audio/mpeg"


@pytest.mark.parametrize("fmt", FORMATS)
def test_file_round_trip_duration(fmt: str) -> None:
    x = voice_like(1.3)
    y, rate = decode_audio(encode_file(x, SR, fmt), fmt, sample_rate=SR)
    assert abs(len(y) / rate - 1.3) <= TOL_S  # mp3 files carry LAME gapless info: exact
    if fmt in ("wav", "pcm", "flac"):
        assert rate == SR and np.max(np.abs(y - x)) < 1e-4  # lossless


@pytest.mark.parametrize("fmt", FORMATS)
def test_chunks_decode_alone_and_together(fmt: str) -> None:
    parts = [voice_like(s, seed=i) for i, s in enumerate((0.4, 0.9, 0.25))]
    payloads = [encode_chunk(p, SR, fmt, serial=i + 1) for i, p in enumerate(parts)]
    slack = mp3_chunk_slack(SR) if fmt == "mp3" else TOL_S
    for p, payload in zip(parts, payloads, strict=True):
        y, rate = decode_audio(payload, fmt, sample_rate=SR)
        assert 0 <= len(y) / rate - len(p) / SR <= slack
    whole = assemble(payloads, fmt)
    if formats.get(fmt).concatenable:
        assert whole == b"".join(payloads)
    y, rate = decode_audio(whole, fmt, sample_rate=SR)
    expected = sum(len(p) for p in parts) / SR
    assert 0 <= len(y) / rate - expected <= slack * len(parts) + TOL_S


@pytest.mark.parametrize("rate", [16_000, 22_050, 44_100])
def test_opus_and_mp3_accept_any_rate(rate: int) -> None:
    x = voice_like(0.5, sr=rate)
    for fmt in ("opus", "mp3"):
        y, out_rate = decode_audio(encode_chunk(x, rate, fmt), fmt)
        assert 0 <= len(y) / out_rate - 0.5 <= (mp3_chunk_slack(rate) if fmt == "mp3" else TOL_S)


def test_int16_input_and_thread_safety() -> None:
    x = (voice_like(0.5) * 32767).astype(np.int16)
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda f: encode_chunk(x, SR, f, serial=7), ["opus", "mp3"] * 4))
    assert outs[0::2] == [outs[0]] * 4 and outs[1::2] == [outs[1]] * 4  # deterministic


def test_errors_are_clear() -> None:
    with pytest.raises(UnknownFormatError, match="choose one of wav, pcm, mp3, opus, flac"):
        encode_chunk(voice_like(0.1), SR, "aac")
    with pytest.raises(DecodeError, match="sample_rate"):
        decode_audio(b"\x00\x00", "pcm")
    with pytest.raises(DecodeError):
        decode_audio(b"not audio at all", "flac")


def test_flac_and_wav_are_bit_exact_for_int16_including_full_scale() -> None:
    import numpy as np

    from streamtts.audio.codecs import assemble, decode_audio, encode_chunk, encode_file

    x = np.array([0, 32767, -32767, -32768, 100, -1] * 500, dtype=np.int16)
    for fmt in ("flac", "wav"):
        whole = encode_file(x, 24000, fmt)
        joined = assemble([encode_chunk(x[:1000], 24000, fmt), encode_chunk(x[1000:], 24000, fmt)], fmt)
        for data in (whole, joined):
            decoded, rate = decode_audio(data, fmt)
            assert rate == 24000
            assert np.array_equal(np.round(decoded * 32768).astype(np.int32), x.astype(np.int32))
