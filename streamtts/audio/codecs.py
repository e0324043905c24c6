"""PCM → wav / pcm / mp3 / opus / flac with PyAV (FFmpeg in-process), chunk by chunk.

Chunk payloads are stateless: every call builds its own container and codec context, so a
rebalance mid-request loses no encoder state and calls are thread-safe.

What a chunk payload is, and how chunks make a whole file:

| fmt  | chunk payload                          | byte concatenation of chunks        |
|------|----------------------------------------|-------------------------------------|
| pcm  | raw s16le samples                      | valid raw stream                    |
| mp3  | bare MPEG frames (no ID3, no Xing)     | valid MP3 (each chunk adds the LAME |
|      |                                        | encoder delay + padding, ≤ ~50 ms)  |
| opus | a complete Ogg Opus stream             | valid chained Ogg (RFC 3533 §4);    |
|      | (own serial number)                    | players that stop after the first   |
|      |                                        | link need `assemble`                |
| wav  | a complete WAV file                    | NOT valid: use `assemble`           |
| flac | a complete FLAC file                   | NOT valid (a FLAC stream has one    |
|      |                                        | STREAMINFO header): use `assemble`  |
| mulaw| raw 8-bit G.711 μ-law                   | valid raw stream                    |
| alaw | raw 8-bit G.711 A-law                   | valid raw stream                    |

wav carries 16-bit PCM, or G.711 μ-law / A-law (`codec`, WAVE format tags 7 and 6) for
telephony file delivery.

`assemble(chunks, fmt)` builds one file: pcm/mp3/opus are concatenated; wav joins the data
chunks under one header; flac decodes the chunks and re-encodes once (lossless, so exact).
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Sequence
from typing import cast

import numpy as np

from streamtts.audio.exceptions import DecodeError, EncodeError, UnknownFormatError
from streamtts.audio.g711 import alaw_to_linear, linear_to_alaw, linear_to_mulaw, mulaw_to_linear
from streamtts.audio.pcm import as_float32, resample, to_int16
from streamtts.schemas.names import AUDIO_FORMATS

FORMATS: tuple[str, ...] = AUDIO_FORMATS
CONTENT_TYPES: dict[str, str] = {
    "wav": "audio/wav",
    "pcm": "audio/L16",  # + ;rate=...;channels=1 on the wire (RFC 2586 is big-endian; ours is
    # little-endian s16le, stated in the message metadata)
    "mp3": "audio/mpeg",
    "opus": "audio/ogg; codecs=opus",
    "flac": "audio/flac",
    "mulaw": "audio/basic",  # RFC 2046: 8-bit μ-law, 8 kHz, mono
    "alaw": "audio/x-alaw-basic",
}
EXTENSIONS: dict[str, str] = {
    "wav": ".wav",
    "pcm": ".pcm",
    "mp3": ".mp3",
    "opus": ".opus",
    "flac": ".flac",
    "mulaw": ".ulaw",
    "alaw": ".alaw",
}
# Formats whose chunk payloads can simply be concatenated into a playable stream.
CONCATENABLE: frozenset[str] = frozenset({"pcm", "mp3", "opus", "mulaw", "alaw"})
G711 = {"mulaw": (linear_to_mulaw, mulaw_to_linear, 7), "alaw": (linear_to_alaw, alaw_to_linear, 6)}
"""codec → (encoder, decoder, WAVE format tag)."""

_OPUS_RATES = (8_000, 12_000, 16_000, 24_000, 48_000)
_MP3_RATES = (8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000)
_MP3_BITRATE = 64_000
# LAME's algorithm quality (0 best … 9 fastest; FFmpeg leaves LAME's default, 3). For 64 kbps
# mono speech, 5 ("good speed, reasonable quality") measured 27 % less CPU than 3 at the same
# waveform SNR, and mp3 encoding is the main CPU cost of the encode stage and the sink.
_MP3_QUALITY = "5"
_OPUS_BITRATE = 32_000


def check_format(fmt: str) -> str:
    """Return `fmt` normalized (lower case) or raise `UnknownFormatError` naming the choices."""
    key = fmt.lower().strip() if isinstance(fmt, str) else ""
    if key not in FORMATS:
        raise UnknownFormatError(f"unknown audio format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return key


def _wav_bytes(pcm16: np.ndarray, sample_rate: int, codec: str = "pcm_s16le") -> bytes:
    if codec in G711:
        return _g711_wav(G711[codec][0](pcm16), sample_rate, G711[codec][2])
    data = pcm16.astype("<i2").tobytes()
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(data),
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        sample_rate,
        sample_rate * 2,
        2,
        16,
        b"data",
        len(data),
    )
    return header + data


def _g711_wav(data: bytes, sample_rate: int, tag: int) -> bytes:
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


def _encode_av(samples: np.ndarray, sample_rate: int, fmt: str, *, chunk: bool, serial: int | None) -> bytes:
    """Encode with PyAV into an in-memory container."""
    import av

    audio = as_float32(samples)
    if fmt == "opus":
        codec, container_fmt, layout_rate = "libopus", "ogg", sample_rate
        if sample_rate not in _OPUS_RATES:
            audio, layout_rate = resample(audio, sample_rate, 48_000), 48_000
        # bitexact: the Ogg serial is serial_offset (not random) and output is reproducible.
        options: dict[str, str] = {"fflags": "+bitexact"}
        if serial is not None:
            options["serial_offset"] = str(serial)
        codec_options = {}
        bit_rate = _OPUS_BITRATE
    elif fmt == "mp3":
        codec, container_fmt, layout_rate = "libmp3lame", "mp3", sample_rate
        if sample_rate not in _MP3_RATES:
            target = 48_000 if sample_rate > 24_000 else 24_000
            audio, layout_rate = resample(audio, sample_rate, target), target
        # Bare frames for chunks: an ID3 tag or a Xing/LAME info frame in the middle of a
        # concatenated stream is decoded as garbage/silence by some players.
        options = {"id3v2_version": "0", "write_xing": "0"} if chunk else {}
        codec_options = {"compression_level": _MP3_QUALITY}
        bit_rate = _MP3_BITRATE
    else:  # flac
        codec, container_fmt, layout_rate = "flac", "flac", sample_rate
        options, codec_options, bit_rate = {}, {}, 0
        audio = to_int16(samples)  # from the caller's samples: int16 input stays bit-exact

    buf = io.BytesIO()
    try:
        with av.open(buf, mode="w", format=container_fmt, options=options) as container:
            stream = cast(
                "av.audio.stream.AudioStream",
                container.add_stream(codec, rate=layout_rate, layout="mono"),
            )
            if bit_rate:
                stream.bit_rate = bit_rate
            stream.codec_context.options = codec_options
            if fmt == "flac":
                frame = av.AudioFrame.from_ndarray(audio.reshape(1, -1), format="s16", layout="mono")
            else:
                frame = av.AudioFrame.from_ndarray(
                    audio.astype(np.float32).reshape(1, -1), format="flt", layout="mono"
                )
            frame.sample_rate = layout_rate
            frame.pts = 0
            if len(audio):
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
    except av.FFmpegError as err:
        raise EncodeError(f"{fmt} encoding failed: {err}") from err
    return buf.getvalue()


def encode_chunk(
    samples: np.ndarray, sample_rate: int, fmt: str, *, serial: int | None = None, codec: str = "pcm_s16le"
) -> bytes:
    """Encode one chunk as an independently decodable payload (see the module table).

    Args:
        samples: mono PCM, int16 or float32 in [-1, 1].
        sample_rate: rate of `samples` in Hz.
        fmt: wav, pcm, mp3, opus or flac.
        serial: Ogg stream serial for opus (chained streams should differ; default: a CRC of
            the samples, so the same chunk always encodes to the same bytes).
        codec: for wav, pcm_s16le or G.711 mulaw / alaw.
    Returns:
        The payload bytes.
    Raises:
        UnknownFormatError, EncodeError.
    """
    fmt = check_format(fmt)
    if fmt == "pcm":
        return to_int16(samples).astype("<i2").tobytes()
    if fmt == "wav":
        return _wav_bytes(to_int16(samples), sample_rate, codec)
    if fmt in G711:
        return G711[fmt][0](to_int16(samples))
    if fmt == "opus" and serial is None:
        serial = zlib.crc32(to_int16(samples).tobytes()) & 0x7FFFFFFF
    return _encode_av(samples, sample_rate, fmt, chunk=True, serial=serial)


def encode_file(samples: np.ndarray, sample_rate: int, fmt: str, *, codec: str = "pcm_s16le") -> bytes:
    """Encode a whole utterance as one file (mp3 with its Xing header, single-link Ogg).

    Args/Raises: as `encode_chunk`.
    """
    fmt = check_format(fmt)
    if fmt in ("pcm", "wav", *G711):
        return encode_chunk(samples, sample_rate, fmt, codec=codec)
    return _encode_av(samples, sample_rate, fmt, chunk=False, serial=None)


def assemble(chunks: Sequence[bytes], fmt: str, *, sample_rate: int | None = None) -> bytes:
    """Build one file from chunk payloads made by `encode_chunk`, in order.

    Args:
        chunks: payloads in sequence order.
        fmt: their format.
        sample_rate: the rate of a wav/flac file with no audio at all (every payload that
            holds samples carries its own rate).
    Returns:
        pcm/mp3/opus: the concatenation; wav: one WAV with all samples; flac: one FLAC file.
        Empty payloads (the markers of a cancelled request) hold no samples and are skipped.
    Raises:
        UnknownFormatError, DecodeError (a wav/flac chunk is malformed, or no chunk and no
        sample_rate).
    """
    fmt = check_format(fmt)
    chunks = [c for c in chunks if c]
    if fmt in CONCATENABLE:
        return b"".join(chunks)
    if not chunks:
        if not sample_rate:
            raise DecodeError(f"cannot assemble an empty {fmt} file")
        return encode_file(np.zeros(0, np.int16), sample_rate, fmt)
    if fmt == "wav":
        # Joined as they are (no decode): 16-bit PCM or G.711 bytes under one header.
        parts = [wav_data(payload) for payload in chunks]
        tags, rates = {p[0] for p in parts}, {p[1] for p in parts}
        if len(tags) > 1 or len(rates) > 1:
            raise DecodeError(f"wav chunks differ in codec or sample rate ({sorted(tags)}, {sorted(rates)})")
        tag, rate, data = parts[0][0], parts[0][1], b"".join(p[2] for p in parts)
        if tag == 1:
            return _wav_bytes(np.frombuffer(data, dtype="<i2"), rate)
        return _g711_wav(data, rate, tag)
    pieces: list[np.ndarray] = []
    rate = 0
    for payload in chunks:
        samples, chunk_rate = decode_audio(payload, fmt)
        if rate and chunk_rate != rate:
            raise DecodeError(f"{fmt} chunks have different sample rates ({rate}, {chunk_rate})")
        rate = chunk_rate
        # decode_audio scales s16 by 1/32768: undo exactly (not _as_int16's 32767) so that
        # re-encoding FLAC is bit-exact.
        pieces.append(np.clip(np.round(samples * 32768.0), -32768, 32767).astype(np.int16))
    return encode_file(np.concatenate(pieces), rate, "flac")


def wav_data(payload: bytes) -> tuple[int, int, bytes]:
    """(WAVE format tag, sample rate, data bytes) of a WAV made by `encode_chunk`."""
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


def decode_audio(data: bytes, fmt: str, *, sample_rate: int | None = None) -> tuple[np.ndarray, int]:
    """Decode a payload or file to float32 mono.

    Args:
        data: encoded bytes (chained Ogg and concatenated MP3 included).
        fmt: its format.
        sample_rate: required for raw pcm (which carries no header), ignored otherwise.
    Returns:
        (samples float32 in [-1, 1], sample_rate).
    Raises:
        UnknownFormatError, DecodeError.
    """
    fmt = check_format(fmt)
    if fmt in G711:
        if not sample_rate:
            raise DecodeError(f"raw {fmt} needs sample_rate to be decoded")
        return G711[fmt][1](data).astype(np.float32) / 32768.0, sample_rate
    if fmt == "pcm":
        if not sample_rate:
            raise DecodeError("raw pcm needs sample_rate to be decoded")
        if len(data) % 2:
            raise DecodeError("raw s16le pcm has an odd number of bytes")
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0, sample_rate
    if not data:
        return np.zeros(0, np.float32), sample_rate or 0  # an empty chunk (no samples)
    import av

    demux_fmt = {"wav": "wav", "mp3": "mp3", "opus": "ogg", "flac": "flac"}[fmt]
    pieces: list[np.ndarray] = []
    rate = 0
    try:
        with av.open(io.BytesIO(data), mode="r", format=demux_fmt) as container:
            for frame in container.decode(audio=0):
                raw = frame.to_ndarray()
                arr = raw.astype(np.float64)
                if np.issubdtype(raw.dtype, np.integer):
                    arr /= float(np.iinfo(raw.dtype.type).max) + 1.0  # type: ignore[type-var]
                # Planar formats are (channels, n), packed ones (1, n * channels).
                channels = len(frame.layout.channels)
                if frame.format.is_planar:
                    arr = arr.mean(axis=0)
                else:
                    arr = arr.reshape(-1, channels).mean(axis=1)
                pieces.append(arr.astype(np.float32))
                rate = frame.sample_rate
    except av.FFmpegError as err:
        raise DecodeError(f"cannot decode {fmt}: {err}") from err
    if not pieces:
        raise DecodeError(f"no {fmt} audio frames in {len(data)} bytes")
    return np.concatenate(pieces), rate
