"""The builders the registry table (`streamtts.audio.formats`) makes its codecs with: formats
FFmpeg encodes, headerless samples (raw PCM, G.711), and the pieces WAV, Ogg and FLAC need."""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from streamtts.audio import ffmpeg, mp3_frames, wav
from streamtts.audio.audio_codec import (
    Assembler,
    AudioCodec,
    ChunkEncoder,
    Decoder,
    StreamEncoder,
    StreamFiler,
)
from streamtts.audio.exceptions import DecodeError
from streamtts.audio.pcm import to_int16


def av_codec(
    encoding: ffmpeg.AvEncoding,
    *,
    content_type: str,
    extension: str,
    concatenable: bool,
    encode_chunk: ChunkEncoder | None = None,
    assemble: Assembler | None = None,
    suffixes: tuple[str, ...] = (),
    file_from_stream: StreamFiler | None = None,
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
        decode=av_decoder(encoding.name, encoding.container),
        assemble=assemble,
        openai_name=encoding.name,
        suffixes=suffixes,
        open_stream=open_stream,
        file_from_stream=file_from_stream,
    )


def av_decoder(name: str, demuxer: str) -> Decoder:
    def decode(data: bytes, sample_rate: int | None) -> tuple[np.ndarray, int]:
        return ffmpeg.decode(data, demuxer, name, sample_rate)

    return decode


def headerless_codec(
    name: str,
    encoder: Callable[[np.ndarray], bytes],
    decoder: Callable[[bytes], np.ndarray],
    *,
    content_type: str,
    extension: str,
    sample_width: int,
    silence: bytes,
    suffixes: tuple[str, ...],
    content_type_params: str = "",
    default_rate: int | None = None,
    openai_name: str | None = None,
) -> AudioCodec:
    """Raw samples with no header (s16le PCM, 8-bit G.711): chunks concatenate, a chunk is a
    whole file, and only a caller who knows the rate can decode them.

    Args:
        encoder: int16 samples → bytes.
        decoder: bytes → int16 samples (raises DecodeError for malformed data).
    """

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
        content_type_params=content_type_params,
        extension=extension,
        concatenable=True,
        encode_chunk=encode_chunk,
        encode_file=encode_file,
        decode=decode,
        default_rate=default_rate,
        openai_name=openai_name,
        sample_width=sample_width,
        silence=silence,
        suffixes=suffixes,
        joins_losslessly=True,  # raw samples: the joined chunks are the file
    )


def s16le_bytes(pcm16: np.ndarray) -> bytes:
    return pcm16.astype("<i2").tobytes()


def s16le_samples(data: bytes) -> np.ndarray:
    if len(data) % 2:
        raise DecodeError("raw s16le pcm has an odd number of bytes")
    return np.frombuffer(data, dtype="<i2")


def wav_encode(
    samples: np.ndarray, sample_rate: int, *, serial: int | None = None, codec: str = "pcm_s16le"
) -> bytes:
    return wav.encode(to_int16(samples), sample_rate, codec)


def ogg_chunks(encoding: ffmpeg.AvEncoding) -> ChunkEncoder:
    """Chunks that are whole Ogg streams, each with its own serial (chained Ogg)."""

    def encode_chunk(
        samples: np.ndarray, sample_rate: int, *, serial: int | None = None, codec: str = ""
    ) -> bytes:
        # Chained streams need distinct serials; by default a CRC of the samples, so the same
        # chunk always encodes to the same bytes.
        if serial is None:
            serial = zlib.crc32(to_int16(samples).tobytes()) & 0x7FFFFFFF
        return ffmpeg.encode(
            encoding, samples, sample_rate, chunk=True, options={"serial_offset": str(serial)}
        )

    return encode_chunk


def lossless_reencoder(encoding: ffmpeg.AvEncoding) -> Assembler:
    """Joins chunks of a lossless format whose file has one header (FLAC's STREAMINFO):
    decode them and encode once (lossless, so exact)."""

    def assemble(chunks: Sequence[bytes]) -> bytes:
        pieces: list[np.ndarray] = []
        rate = 0
        for payload in chunks:
            samples, chunk_rate = ffmpeg.decode(payload, encoding.container, encoding.name)
            if rate and chunk_rate != rate:
                raise DecodeError(
                    f"{encoding.name} chunks have different sample rates ({rate}, {chunk_rate})"
                )
            rate = chunk_rate
            # decode scales s16 by 1/32768: undo exactly (not to_int16's 32767) so that
            # re-encoding is bit-exact.
            pieces.append(np.clip(np.round(samples * 32768.0), -32768, 32767).astype(np.int16))
        return ffmpeg.encode(encoding, np.concatenate(pieces), rate, chunk=False)

    return assemble


def mp3_stream_filer(encoding: ffmpeg.AvEncoding) -> StreamFiler:
    """An MP3 file of one stream's frames: the frames behind the Info frame (encoder delay and
    padding) that a file of this encoding would begin with (see `mp3_frames`)."""

    @functools.cache
    def reference(sample_rate: int) -> mp3_frames.LameTag:
        # Pure memoization of a constant per rate: what this encoder's own whole file says.
        whole = ffmpeg.encode(encoding, np.zeros(1152, np.int16), sample_rate, chunk=False)
        tag = mp3_frames.read_lame_tag(whole)
        if tag is None:
            raise DecodeError(f"{encoding.name}: the file encoder wrote no LAME tag")
        return tag

    def file_from_stream(frames_data: bytes, n_samples: int, sample_rate: int) -> bytes:
        return mp3_frames.file_from_frames(frames_data, n_samples, sample_rate, reference(sample_rate))

    return file_from_stream
