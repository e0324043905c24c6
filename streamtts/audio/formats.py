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

The record itself is `audio_codec.AudioCodec`; the table at the end builds the built-in ones
with `codec_builders`.
"""

from __future__ import annotations

from streamtts.audio import ffmpeg, wav
from streamtts.audio.audio_codec import AudioCodec, LiveStream
from streamtts.audio.audio_codec import StreamEncoder as StreamEncoder  # importers name it here
from streamtts.audio.codec_builders import (
    av_codec,
    av_decoder,
    headerless_codec,
    lossless_reencoder,
    mp3_stream_filer,
    ogg_chunks,
    s16le_bytes,
    s16le_samples,
    wav_encode,
)
from streamtts.audio.exceptions import UnknownFormatError
from streamtts.audio.g711 import (
    TELEPHONY_RATE,
    alaw_to_linear,
    linear_to_alaw,
    linear_to_mulaw,
    mulaw_to_linear,
)

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


for _codec in (
    AudioCodec(
        name="wav",
        content_type="audio/wav",
        extension=".wav",
        concatenable=False,
        encode_chunk=wav_encode,
        encode_file=wav_encode,
        decode=av_decoder("wav", "wav"),
        assemble=wav.assemble,
        live=LiveStream(wav.live_header, wav.live_samples),
        openai_name="wav",
        joins_losslessly=True,  # `assemble` puts the chunks' samples under one header
    ),
    headerless_codec(
        "pcm",
        s16le_bytes,
        s16le_samples,
        # RFC 2586's L16 is big-endian; ours is little-endian s16le, stated in the parameters
        # and in the message metadata.
        content_type="audio/L16",
        content_type_params=";rate={rate};channels=1;endianness=little-endian",
        extension=".pcm",
        openai_name="pcm",
        sample_width=2,
        silence=b"\x00\x00",
        suffixes=(".raw",),
    ),
    av_codec(
        _MP3,
        content_type="audio/mpeg",
        extension=".mp3",
        concatenable=True,
        # The stored file is the streamed frames behind an Info frame (one encode a request).
        file_from_stream=mp3_stream_filer(_MP3),
    ),
    av_codec(
        _OPUS,
        content_type="audio/ogg; codecs=opus",
        extension=".opus",
        concatenable=True,
        encode_chunk=ogg_chunks(_OPUS),
        suffixes=(".ogg",),
    ),
    av_codec(
        _FLAC,
        content_type="audio/flac",
        extension=".flac",
        concatenable=False,
        assemble=lossless_reencoder(_FLAC),
    ),
    # Raw 8-bit G.711 (telephony): 8 kHz unless asked otherwise.
    headerless_codec(
        "mulaw",
        linear_to_mulaw,
        mulaw_to_linear,
        content_type="audio/basic",  # RFC 2046: 8-bit μ-law, 8 kHz, mono
        extension=".ulaw",
        default_rate=TELEPHONY_RATE,
        sample_width=1,
        silence=b"\xff",  # G.711's zero code
        suffixes=(".ul",),
    ),
    headerless_codec(
        "alaw",
        linear_to_alaw,
        alaw_to_linear,
        content_type="audio/x-alaw-basic",
        extension=".alaw",
        default_rate=TELEPHONY_RATE,
        sample_width=1,
        silence=b"\xd5",
        suffixes=(".al",),
    ),
):
    register(_codec)
