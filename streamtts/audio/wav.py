"""WAV files: 16-bit PCM, or G.711 μ-law / A-law (WAVE format tags 7 and 6) for telephony.

Every chunk payload is a complete WAV file; `assemble` joins their data chunks under one
header (no decode), and `streaming_wav_header` opens a live stream of unknown length.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

import numpy as np

from streamtts.audio.exceptions import DecodeError
from streamtts.audio.g711 import linear_to_alaw, linear_to_mulaw

PCM_TAG = 1
G711: dict[str, tuple[Callable[[np.ndarray], bytes], int]] = {
    "mulaw": (linear_to_mulaw, 7),
    "alaw": (linear_to_alaw, 6),
}
"""What a WAV may hold besides 16-bit PCM: codec → (encoder, WAVE format tag)."""


def encode(pcm16: np.ndarray, sample_rate: int, codec: str = "pcm_s16le") -> bytes:
    """int16 samples → one WAV file holding `codec` (pcm_s16le, mulaw or alaw)."""
    if codec in G711:
        encoder, tag = G711[codec]
        return g711_wav(encoder(pcm16), sample_rate, tag)
    return pcm_wav(pcm16.astype("<i2").tobytes(), sample_rate)


def pcm_wav(data: bytes, sample_rate: int) -> bytes:
    """A 16-bit mono PCM WAV of s16le `data`."""
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(data),
        b"WAVE",
        b"fmt ",
        16,
        PCM_TAG,
        1,
        sample_rate,
        sample_rate * 2,
        2,
        16,
        b"data",
        len(data),
    )
    return header + data


def g711_wav(data: bytes, sample_rate: int, tag: int) -> bytes:
    """A WAV of G.711 bytes: the 18-byte fmt chunk and the fact chunk non-PCM WAVs carry."""
    fmt = struct.pack("<HHIIHHH", tag, 1, sample_rate, sample_rate, 1, 8, 0)
    body = (
        b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"fact"
        + struct.pack("<II", 4, len(data))
        + b"data"
        + struct.pack("<I", len(data))
        + data
        + (b"\0" if len(data) % 2 else b"")
    )
    return b"RIFF" + struct.pack("<I", len(body)) + body


def wav_data(payload: bytes) -> tuple[int, int, bytes]:
    """(WAVE format tag, sample rate, data bytes) of a WAV made by `encode`."""
    if payload[:4] != b"RIFF" or payload[8:12] != b"WAVE":
        raise DecodeError("wav chunk has no RIFF/WAVE header")
    pos, tag, rate = 12, 0, 0
    while pos + 8 <= len(payload):
        kind, size = payload[pos : pos + 4], struct.unpack_from("<I", payload, pos + 4)[0]
        if kind == b"fmt ":
            tag, _channels, rate = struct.unpack_from("<HHI", payload, pos + 8)
        elif kind == b"data":
            return tag, rate, payload[pos + 8 : pos + 8 + size]
        pos += 8 + size + (size & 1)
    raise DecodeError("wav chunk has no data chunk")


def assemble(chunks: Sequence[bytes]) -> bytes:
    """One WAV from WAV chunks, joined as they are (no decode): 16-bit PCM or G.711 bytes
    under one header. Raises DecodeError when the chunks differ in codec or rate."""
    parts = [wav_data(payload) for payload in chunks]
    tags, rates = {p[0] for p in parts}, {p[1] for p in parts}
    if len(tags) > 1 or len(rates) > 1:
        raise DecodeError(f"wav chunks differ in codec or sample rate ({sorted(tags)}, {sorted(rates)})")
    tag, rate, data = parts[0][0], parts[0][1], b"".join(p[2] for p in parts)
    if tag == PCM_TAG:
        return pcm_wav(data, rate)
    return g711_wav(data, rate, tag)


def streaming_wav_header(sample_rate: int, tag: int = PCM_TAG) -> bytes:
    """A WAV header for a stream of unknown length (sizes 0xFFFFFFFF, as ffmpeg and browsers
    expect for live WAV): each chunk is a complete WAV file, so only its samples follow.
    tag 1: 16-bit PCM; 7 / 6: G.711 μ-law / A-law (8 bits a sample)."""
    unknown = 0xFFFFFFFF
    if tag == PCM_TAG:
        fmt = struct.pack("<HHIIHH", PCM_TAG, 1, sample_rate, sample_rate * 2, 2, 16)
    else:
        fmt = struct.pack("<HHIIHHH", tag, 1, sample_rate, sample_rate, 1, 8, 0)
    return (
        b"RIFF"
        + struct.pack("<I", unknown)
        + b"WAVEfmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", unknown)
    )


def live_header(first_payload: bytes, sample_rate: int) -> bytes:
    """The streaming header for a live WAV whose first chunk is `first_payload` (its codec
    decides the tag; a malformed chunk streams as 16-bit PCM)."""
    try:
        tag = wav_data(first_payload)[0]
    except DecodeError:
        tag = PCM_TAG
    return streaming_wav_header(sample_rate, tag)


def live_samples(payload: bytes) -> bytes:
    """The data bytes of one WAV chunk in a live stream (empty for a malformed one)."""
    try:
        return wav_data(payload)[2]
    except DecodeError:
        return b""
