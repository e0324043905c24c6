"""The audio formats, declared once: one `AudioCodec` per format in one registry.

Everything that offers, checks or serves a format looks it up here by name: the request
contract's validation and JSON Schema, the CLI's `--format` choices, the gateway's OpenAPI
enums, the OpenAI-compatible endpoint, HTTP content types and object-store keys. A new format
is one `register(AudioCodec(...))` (like faust's `serializers/codecs.register(name, codec)`).

What a chunk payload of each built-in format is, and how chunks make a whole file:

| fmt  | chunk payload                          | byte concatenation of chunks        |
|------|----------------------------------------|-------------------------------------|
| pcm  | raw s16le samples                      | valid raw stream                    |
| mp3  | bare MPEG frames (no ID3, no Xing, no  | valid MP3; a request's chunks from  |
|      | bit reservoir: each decodes alone)     | one stream (`open_stream`) are one  |
|      |                                        | gapless stream, chunks encoded      |
|      |                                        | alone add encoder delay + padding   |
|      |                                        | (~45–95 ms) at every boundary       |
| opus | a complete Ogg Opus stream             | valid chained Ogg (RFC 3533 §4);    |
|      | (own serial number)                    | players that stop after the first   |
|      |                                        | link need `assemble`                |
| wav  | a complete WAV file                    | NOT valid: use `assemble`           |
| flac | a complete FLAC file                   | NOT valid (a FLAC stream has one    |
|      |                                        | STREAMINFO header): use `assemble`  |
| mulaw| raw 8-bit G.711 μ-law                   | valid raw stream                    |
| alaw | raw 8-bit G.711 A-law                   | valid raw stream                    |

wav carries 16-bit PCM, or G.711 μ-law / A-law (`codec`) for telephony file delivery.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from streamtts.audio import ffmpeg, wav
from streamtts.audio.exceptions import DecodeError, UnknownFormatError
from streamtts.audio.g711 import (
    TELEPHONY_RATE,
    alaw_to_linear,
    linear_to_alaw,
    linear_to_mulaw,
    mulaw_to_linear,
)
from streamtts.audio.pcm import to_int16


class ChunkEncoder(Protocol):
    def __call__(self, samples: np.ndarray, sample_rate: int, *, serial: int | None, codec: str) -> bytes:
        """Mono PCM (int16, or float32 in [-1, 1]) → one independently decodable payload.
        `serial`: the Ogg stream serial (None: the codec's own choice); `codec`: what a
        container holds (wav: pcm_s16le, mulaw or alaw; ignored elsewhere)."""
        ...


class FileEncoder(Protocol):
    def __call__(self, samples: np.ndarray, sample_rate: int, *, codec: str) -> bytes:
        """Mono PCM → one whole file (mp3 with its Xing header, single-link Ogg)."""
        ...


class StreamEncoder(Protocol):
    """A continuous encoder for one request's chunks, fed in order (see `ffmpeg.AvStream`)."""

    def feed(self, samples: np.ndarray) -> bytes:
        """The next chunk's samples → the payload completed so far (may be empty)."""
        ...

    def finish(self) -> bytes:
        """The samples held back, as the stream's last payload bytes (the stream ends)."""
        ...


StreamOpener = Callable[[int], StreamEncoder | None]
"""Sample rate → a continuous encoder, or None where the format has none at that rate."""
Decoder = Callable[[bytes, int | None], tuple[np.ndarray, int]]
"""(bytes, rate of headerless data or None) → (float32 samples in [-1, 1], sample rate)."""
Assembler = Callable[[Sequence[bytes]], bytes]
"""Non-empty chunk payloads, in order → one file."""


@dataclass(frozen=True)
class LiveStream:
    """How a chunked HTTP response streams a format while its chunks arrive."""

    header: Callable[[bytes, int], bytes]
    """(first chunk payload, sample rate) → bytes sent before the first chunk (may be empty)."""
    payload: Callable[[bytes], bytes]
    """A chunk payload → the bytes it adds to the stream."""


def _no_header(first: bytes, sample_rate: int) -> bytes:
    return b""


def _as_is(payload: bytes) -> bytes:
    return payload


PASS_THROUGH = LiveStream(_no_header, _as_is)
"""Concatenable formats stream their payloads as they are."""


@dataclass(frozen=True)
class AudioCodec:
    """One audio format: what it is called, how it is encoded, decoded and served."""

    name: str
    """The format's name in requests (`format`), the CLI and the API."""
    content_type: str
    """MIME type of its files and streams."""
    extension: str
    """File extension with the dot (object-store keys, download names)."""
    concatenable: bool
    """Whether chunk payloads byte-concatenate into a playable stream (`assemble` joins them)."""
    encode_chunk: ChunkEncoder
    encode_file: FileEncoder
    decode: Decoder
    assemble: Assembler | None = None
    """Builds one file from chunks (not used for concatenable formats: their join is the file)."""
    default_rate: int | None = None
    """The sample rate a request gets when it asks for none (None: the pipeline's default)."""
    content_type_params: str = ""
    """MIME parameters appended with the rate filled in (`;rate={rate}`), for headerless audio."""
    openai_name: str | None = None
    """Its `response_format` at the OpenAI-compatible endpoint (None: not offered there)."""
    sample_width: int | None = None
    """Bytes per sample of a headerless stream that can be cut into fixed telephony frames."""
    silence: bytes = b""
    """One sample of silence in this format (pads the last telephony frame)."""
    live: LiveStream | None = None
    """How a non-concatenable format streams over HTTP (None: served once complete)."""
    suffixes: tuple[str, ...] = ()
    """Other file extensions that mean this format (`streamtts synth --out speech.ogg`)."""
    open_stream: StreamOpener | None = None
    """A continuous encoder whose payloads join gaplessly (None: chunks are encoded alone)."""

    def __post_init__(self) -> None:
        # Paranoid: a format that cannot be joined must say how its file is built.
        if not self.concatenable and self.assemble is None:
            raise ValueError(f"format {self.name!r} is not concatenable, so it needs an assemble function")
        if self.sample_width is not None and len(self.silence) != self.sample_width:
            raise ValueError(f"format {self.name!r}: silence must be one sample ({self.sample_width} bytes)")

    def media_type(self, sample_rate: int) -> str:
        """The Content-Type of this format's audio at `sample_rate`."""
        return self.content_type + self.content_type_params.format(rate=sample_rate)

    @property
    def live_stream(self) -> LiveStream | None:
        """How it streams while chunks arrive (None: only as a whole file)."""
        return PASS_THROUGH if self.concatenable else self.live


# The one registry: name → codec, in registration order (the order choices are offered in).
_CODECS: dict[str, AudioCodec] = {}


def register(codec: AudioCodec) -> AudioCodec:
    """Add `codec` under its name. Raises ValueError when the name is taken."""
    if codec.name in _CODECS:
        raise ValueError(f"audio format {codec.name!r} is already registered")
    if codec.openai_name is not None and codec.openai_name in openai_formats():
        raise ValueError(f"OpenAI response_format {codec.openai_name!r} is already taken")
    _CODECS[codec.name] = codec
    return codec


def unregister(name: str) -> None:
    """Remove a registered format (tests, plugins that unload)."""
    _CODECS.pop(name, None)


def find(name: object) -> AudioCodec | None:
    """The codec named exactly `name`, or None."""
    return _CODECS.get(name) if isinstance(name, str) else None


def get(name: str) -> AudioCodec:
    """The codec named exactly `name`. Raises UnknownFormatError naming the choices."""
    codec = find(name)
    if codec is None:
        raise UnknownFormatError(f"unknown audio format {name!r}; choose one of {', '.join(_CODECS)}")
    return codec


def names() -> tuple[str, ...]:
    """Every registered format's name, in registration order."""
    return tuple(_CODECS)


def codecs() -> tuple[AudioCodec, ...]:
    """Every registered codec, in registration order."""
    return tuple(_CODECS.values())


def openai_formats() -> dict[str, str]:
    """OpenAI `response_format` → our format name, for the formats offered there."""
    return {c.openai_name: c.name for c in _CODECS.values() if c.openai_name is not None}


def for_suffix(suffix: str) -> AudioCodec | None:
    """The format a file name ending in `suffix` (".ogg", "mp3") means, or None."""
    key = "." + suffix.lower().lstrip(".")
    for codec in _CODECS.values():
        if key in (f".{codec.name}", codec.extension, *codec.suffixes):
            return codec
    return None


def default_rate(fmt: object, codec: object = "pcm_s16le") -> int | None:
    """The sample rate of a request for `fmt` (holding `codec`) that names none: the format's
    own default, or that of the codec a container holds (a wav of G.711 is 8 kHz too)."""
    for name in (fmt, codec):
        found = find(name)
        if found is not None and found.default_rate is not None:
            return found.default_rate
    return None


# -- the built-in formats ----------------------------------------------------------------------

_MP3 = ffmpeg.AvEncoding(
    name="mp3",
    codec="libmp3lame",
    container="mp3",
    rates=(8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000),
    fallback_rates=(24_000, 48_000),
    bit_rate=64_000,
    # LAME's algorithm quality (0 best … 9 fastest; FFmpeg leaves LAME's default, 3). For 64 kbps
    # mono speech, 5 ("good speed, reasonable quality") measured 27 % less CPU than 3 at the same
    # waveform SNR, and mp3 encoding is the main CPU cost of the encode stage and the sink.
    codec_options={"compression_level": "5"},
    # Bare frames for chunks: an ID3 tag or a Xing/LAME info frame in the middle of a
    # concatenated stream is decoded as garbage/silence by some players.
    chunk_options={"id3v2_version": "0", "write_xing": "0"},
    # A stream's frames keep no bits in the reservoir for the next frame, so every chunk's
    # frames decode alone (a client decoding payload by payload, or joining mid-request).
    # Measured on a 24 s Piper answer: 23.8 dB waveform SNR against 24.3 for the whole file.
    stream_options={"reservoir": "0"},
)
_OPUS = ffmpeg.AvEncoding(
    name="opus",
    codec="libopus",
    container="ogg",
    rates=(8_000, 12_000, 16_000, 24_000, 48_000),
    bit_rate=32_000,
    # bitexact: the Ogg serial is serial_offset (not random) and output is reproducible.
    file_options={"fflags": "+bitexact"},
    chunk_options={"fflags": "+bitexact"},
)
_FLAC = ffmpeg.AvEncoding(name="flac", codec="flac", container="flac", lossless_int16=True)


def _pcm_encode(
    samples: np.ndarray, sample_rate: int, *, serial: int | None = None, codec: str = ""
) -> bytes:
    return to_int16(samples).astype("<i2").tobytes()


def _pcm_decode(data: bytes, sample_rate: int | None) -> tuple[np.ndarray, int]:
    if not sample_rate:
        raise DecodeError("raw pcm needs sample_rate to be decoded")
    if len(data) % 2:
        raise DecodeError("raw s16le pcm has an odd number of bytes")
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0, sample_rate


def _wav_encode(
    samples: np.ndarray, sample_rate: int, *, serial: int | None = None, codec: str = "pcm_s16le"
) -> bytes:
    return wav.encode(to_int16(samples), sample_rate, codec)


def _av_decoder(name: str, demuxer: str) -> Decoder:
    def decode(data: bytes, sample_rate: int | None) -> tuple[np.ndarray, int]:
        return ffmpeg.decode(data, demuxer, name, sample_rate)

    return decode


def _opus_chunk(
    samples: np.ndarray, sample_rate: int, *, serial: int | None = None, codec: str = ""
) -> bytes:
    # Chained streams need distinct serials; by default a CRC of the samples, so the same
    # chunk always encodes to the same bytes.
    if serial is None:
        serial = zlib.crc32(to_int16(samples).tobytes()) & 0x7FFFFFFF
    return ffmpeg.encode(_OPUS, samples, sample_rate, chunk=True, options={"serial_offset": str(serial)})


def _av_codec(
    encoding: ffmpeg.AvEncoding,
    *,
    content_type: str,
    extension: str,
    concatenable: bool,
    encode_chunk: ChunkEncoder | None = None,
    assemble: Assembler | None = None,
    suffixes: tuple[str, ...] = (),
) -> AudioCodec:
    """A format FFmpeg encodes and decodes: its name, demuxer and encoders come from `encoding`
    (`encode_chunk` replaces the plain chunk encoder where a chunk needs more)."""

    def plain_chunk(
        samples: np.ndarray, sample_rate: int, *, serial: int | None = None, codec: str = ""
    ) -> bytes:
        return ffmpeg.encode(encoding, samples, sample_rate, chunk=True)

    def encode_file(samples: np.ndarray, sample_rate: int, *, codec: str = "") -> bytes:
        return ffmpeg.encode(encoding, samples, sample_rate, chunk=False)

    def open_stream(sample_rate: int) -> StreamEncoder | None:
        if encoding.stream_options is None or encoding.target_rate(sample_rate) != sample_rate:
            return None
        return ffmpeg.AvStream(encoding, sample_rate)

    return AudioCodec(
        name=encoding.name,
        content_type=content_type,
        extension=extension,
        concatenable=concatenable,
        encode_chunk=encode_chunk or plain_chunk,
        encode_file=encode_file,
        decode=_av_decoder(encoding.name, encoding.container),
        assemble=assemble,
        openai_name=encoding.name,
        suffixes=suffixes,
        open_stream=open_stream,
    )


def _flac_assemble(chunks: Sequence[bytes]) -> bytes:
    """A FLAC stream has one STREAMINFO header: decode the chunks and encode once (lossless,
    so exact)."""
    pieces: list[np.ndarray] = []
    rate = 0
    for payload in chunks:
        samples, chunk_rate = ffmpeg.decode(payload, "flac", "flac")
        if rate and chunk_rate != rate:
            raise DecodeError(f"flac chunks have different sample rates ({rate}, {chunk_rate})")
        rate = chunk_rate
        # decode scales s16 by 1/32768: undo exactly (not to_int16's 32767) so that
        # re-encoding FLAC is bit-exact.
        pieces.append(np.clip(np.round(samples * 32768.0), -32768, 32767).astype(np.int16))
    return ffmpeg.encode(_FLAC, np.concatenate(pieces), rate, chunk=False)


def _g711(
    name: str,
    encoder: Callable[[np.ndarray], bytes],
    decoder: Callable[[bytes], np.ndarray],
    *,
    content_type: str,
    extension: str,
    silence: bytes,
    suffixes: tuple[str, ...],
) -> AudioCodec:
    """Raw 8-bit G.711 (telephony): headerless, concatenable, 8 kHz unless asked otherwise."""

    def encode_chunk(
        samples: np.ndarray, sample_rate: int, *, serial: int | None = None, codec: str = ""
    ) -> bytes:
        return encoder(to_int16(samples))

    def encode_file(samples: np.ndarray, sample_rate: int, *, codec: str = "") -> bytes:
        return encoder(to_int16(samples))

    def decode(data: bytes, sample_rate: int | None) -> tuple[np.ndarray, int]:
        if not sample_rate:
            raise DecodeError(f"raw {name} needs sample_rate to be decoded")
        return decoder(data).astype(np.float32) / 32768.0, sample_rate

    return AudioCodec(
        name=name,
        content_type=content_type,
        extension=extension,
        concatenable=True,
        encode_chunk=encode_chunk,
        encode_file=encode_file,
        decode=decode,
        default_rate=TELEPHONY_RATE,
        sample_width=1,
        silence=silence,
        suffixes=suffixes,
    )


for _codec in (
    AudioCodec(
        name="wav",
        content_type="audio/wav",
        extension=".wav",
        concatenable=False,
        encode_chunk=_wav_encode,
        encode_file=_wav_encode,
        decode=_av_decoder("wav", "wav"),
        assemble=wav.assemble,
        live=LiveStream(wav.live_header, wav.live_samples),
        openai_name="wav",
    ),
    AudioCodec(
        name="pcm",
        # RFC 2586's L16 is big-endian; ours is little-endian s16le, stated in the parameters
        # and in the message metadata.
        content_type="audio/L16",
        content_type_params=";rate={rate};channels=1;endianness=little-endian",
        extension=".pcm",
        concatenable=True,
        encode_chunk=_pcm_encode,
        encode_file=_pcm_encode,
        decode=_pcm_decode,
        openai_name="pcm",
        sample_width=2,
        silence=b"\x00\x00",
        suffixes=(".raw",),
    ),
    _av_codec(_MP3, content_type="audio/mpeg", extension=".mp3", concatenable=True),
    _av_codec(
        _OPUS,
        content_type="audio/ogg; codecs=opus",
        extension=".opus",
        concatenable=True,
        encode_chunk=_opus_chunk,
        suffixes=(".ogg",),
    ),
    _av_codec(
        _FLAC, content_type="audio/flac", extension=".flac", concatenable=False, assemble=_flac_assemble
    ),
    _g711(
        "mulaw",
        linear_to_mulaw,
        mulaw_to_linear,
        content_type="audio/basic",  # RFC 2046: 8-bit μ-law, 8 kHz, mono
        extension=".ulaw",
        silence=b"\xff",  # G.711's zero code
        suffixes=(".ul",),
    ),
    _g711(
        "alaw",
        linear_to_alaw,
        alaw_to_linear,
        content_type="audio/x-alaw-basic",
        extension=".alaw",
        silence=b"\xd5",
        suffixes=(".al",),
    ),
):
    register(_codec)
