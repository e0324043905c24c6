"""Encode, assemble and decode audio by format name: each call looks its codec up in the
registry (`streamtts.audio.formats`, which also tells what a chunk payload of each format is).

`encode_chunk` is stateless: every call builds its own encoder (thread-safe, nothing lost on a
rebalance). `open_stream` gives a continuous encoder for a request's chunks in order, whose
payloads join without a gap at each boundary (mp3).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streamtts.audio import formats
from streamtts.audio.audio_codec import AudioCodec, StreamEncoder
from streamtts.audio.exceptions import DecodeError, UnknownFormatError


def check_format(fmt: str) -> str:
    """Return `fmt` normalized (lower case) or raise `UnknownFormatError` naming the choices."""
    key = fmt.lower().strip() if isinstance(fmt, str) else ""
    if formats.find(key) is None:
        raise UnknownFormatError(f"unknown audio format {fmt!r}; choose one of {', '.join(formats.names())}")
    return key


def _codec(fmt: str) -> AudioCodec:
    return formats.get(check_format(fmt))


def encode_chunk(
    samples: np.ndarray, sample_rate: int, fmt: str, *, serial: int | None = None, codec: str = "pcm_s16le"
) -> bytes:
    """Encode one chunk as an independently decodable payload.

    Args:
        samples: mono PCM, int16 or float32 in [-1, 1].
        sample_rate: rate of `samples` in Hz.
        fmt: a registered format (`formats.names()`).
        serial: Ogg stream serial for opus (chained streams should differ; default: a CRC of
            the samples, so the same chunk always encodes to the same bytes).
        codec: for wav, pcm_s16le or G.711 mulaw / alaw.
    Returns:
        The payload bytes.
    Raises:
        UnknownFormatError, EncodeError.
    """
    return _codec(fmt).encode_chunk(samples, sample_rate, serial=serial, codec=codec)


def open_stream(fmt: str, sample_rate: int) -> StreamEncoder | None:
    """A continuous encoder of `fmt` at `sample_rate`, or None where chunks are encoded alone.

    Raises:
        UnknownFormatError, EncodeError (the encoder failed to open).
    """
    opener = _codec(fmt).open_stream
    return opener(sample_rate) if opener is not None else None


def encode_file(samples: np.ndarray, sample_rate: int, fmt: str, *, codec: str = "pcm_s16le") -> bytes:
    """Encode a whole utterance as one file (mp3 with its Xing header, single-link Ogg).

    Args/Raises: as `encode_chunk`.
    """
    return _codec(fmt).encode_file(samples, sample_rate, codec=codec)


def assemble(chunks: Sequence[bytes], fmt: str, *, sample_rate: int | None = None) -> bytes:
    """Build one file from chunk payloads made by `encode_chunk`, in order.

    Args:
        chunks: payloads in sequence order.
        fmt: their format.
        sample_rate: the rate of a wav/flac file with no audio at all (every payload that
            holds samples carries its own rate).
    Returns:
        Concatenable formats (pcm/mp3/opus/G.711): the concatenation; the others their codec's
        `assemble` (wav: one WAV with all samples; flac: one FLAC file). Empty payloads (the
        markers of a cancelled request) hold no samples and are skipped.
    Raises:
        UnknownFormatError, DecodeError (a wav/flac chunk is malformed, or no chunk and no
        sample_rate).
    """
    codec = _codec(fmt)
    chunks = [c for c in chunks if c]
    if codec.concatenable or codec.assemble is None:
        return b"".join(chunks)
    if not chunks:
        if not sample_rate:
            raise DecodeError(f"cannot assemble an empty {codec.name} file")
        return codec.encode_file(np.zeros(0, np.int16), sample_rate, codec="pcm_s16le")
    return codec.assemble(chunks)


def decode_audio(data: bytes, fmt: str, *, sample_rate: int | None = None) -> tuple[np.ndarray, int]:
    """Decode a payload or file to float32 mono.

    Args:
        data: encoded bytes (chained Ogg and concatenated MP3 included).
        fmt: its format.
        sample_rate: required for headerless formats (raw pcm, G.711), ignored otherwise.
    Returns:
        (samples float32 in [-1, 1], sample_rate).
    Raises:
        UnknownFormatError, DecodeError.
    """
    return _codec(fmt).decode(data, sample_rate)
