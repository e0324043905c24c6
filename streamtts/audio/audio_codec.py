"""What one audio format is: the `AudioCodec` record the registry (`streamtts.audio.formats`)
holds, and the shapes of the encoders, decoders and assemblers it carries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


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
StreamFiler = Callable[[bytes, int, int], bytes]
"""(the joined payloads of one continuous stream, the samples it encoded, their rate) → one
file of those frames, with the header a whole file has (raises DecodeError when they are not
one whole stream)."""


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
    joins_losslessly: bool = False
    """Whether the file `assemble` (or the concatenation) makes of chunk payloads is the file
    `encode_file` makes of their samples: raw samples, WAV. The stored file is then the
    streamed chunks joined (one encode per request)."""
    file_from_stream: StreamFiler | None = None
    """Where the payloads of one stream (`open_stream`, or one chunk) are a file once headed
    (mp3: an Info frame): the stored file is then the frames that were streamed."""

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
    def stores_streamed_frames(self) -> bool:
        """Whether a request's stored file can be made of its streamed payloads, so it is not
        encoded a second time (otherwise the file is encoded from the PCM)."""
        return self.joins_losslessly or self.file_from_stream is not None

    @property
    def live_stream(self) -> LiveStream | None:
        """How it streams while chunks arrive (None: only as a whole file)."""
        return PASS_THROUGH if self.concatenable else self.live
