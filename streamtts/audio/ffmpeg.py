"""Compressed formats with PyAV (FFmpeg in-process): one `AvEncoding` per format, no name switch.

`encode` builds its own container and codec context per call (stateless, thread-safe).
`AvStream` keeps one codec context across a request's chunks, so their payloads join into one
gapless stream (see `streamtts.audio.formats`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from streamtts.audio.exceptions import DecodeError, EncodeError
from streamtts.audio.pcm import as_float32, resample, to_int16


@dataclass(frozen=True)
class AvEncoding:
    """How one format is encoded with FFmpeg."""

    name: str
    """The format's name (in error messages)."""
    codec: str
    """FFmpeg encoder (libmp3lame, libopus, flac)."""
    container: str
    """FFmpeg muxer and demuxer (mp3, ogg, flac)."""
    rates: tuple[int, ...] = ()
    """Sample rates the encoder takes (empty: any rate)."""
    fallback_rates: tuple[int, int] = (48_000, 48_000)
    """Where audio at another rate is resampled to: (at most 24 kHz, above 24 kHz)."""
    bit_rate: int = 0
    """Target bit rate (0: the encoder's own, e.g. lossless)."""
    codec_options: dict[str, str] = field(default_factory=dict)
    file_options: dict[str, str] = field(default_factory=dict)
    """Muxer options of a whole file."""
    chunk_options: dict[str, str] = field(default_factory=dict)
    """Muxer options of a chunk payload (a part of a stream)."""
    lossless_int16: bool = False
    """Feed int16 samples as they are (bit-exact), not as float."""
    stream_options: dict[str, str] | None = None
    """Codec options of a continuous stream (`AvStream`); None: the format has none."""

    def target_rate(self, sample_rate: int) -> int:
        """The rate to encode `sample_rate` audio at."""
        if not self.rates or sample_rate in self.rates:
            return sample_rate
        low, high = self.fallback_rates
        return high if sample_rate > 24_000 else low


def encode(
    enc: AvEncoding,
    samples: np.ndarray,
    sample_rate: int,
    *,
    chunk: bool,
    options: dict[str, str] | None = None,
) -> bytes:
    """Encode mono `samples` into an in-memory container.

    Args:
        enc: the format's encoding.
        samples: mono PCM, int16 or float32 in [-1, 1].
        sample_rate: their rate in Hz.
        chunk: a chunk payload (`enc.chunk_options`) rather than a whole file.
        options: further muxer options (an Ogg serial).
    Raises:
        EncodeError.
    """
    import av

    layout_rate = enc.target_rate(sample_rate)
    if enc.lossless_int16:
        audio = to_int16(samples)  # from the caller's samples: int16 input stays bit-exact
        sample_format = "s16"
    else:
        audio = resample(as_float32(samples), sample_rate, layout_rate).astype(np.float32)
        sample_format = "flt"
    muxer_options = {**(enc.chunk_options if chunk else enc.file_options), **(options or {})}
    buf = io.BytesIO()
    try:
        with av.open(buf, mode="w", format=enc.container, options=muxer_options) as container:
            stream = cast(
                "av.audio.stream.AudioStream",
                container.add_stream(enc.codec, rate=layout_rate, layout="mono"),
            )
            if enc.bit_rate:
                stream.bit_rate = enc.bit_rate
            stream.codec_context.options = dict(enc.codec_options)
            frame = av.AudioFrame.from_ndarray(audio.reshape(1, -1), format=sample_format, layout="mono")
            frame.sample_rate = layout_rate
            frame.pts = 0
            if len(audio):
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
    except av.FFmpegError as err:
        raise EncodeError(f"{enc.name} encoding failed: {err}") from err
    return buf.getvalue()


class AvStream:
    """One continuous encoder: a request's chunks fed one after another.

    Encoding each chunk alone starts every payload with the encoder's delay and ends it padded
    to a whole frame (LAME: ~45–95 ms of silence at every chunk boundary). One codec context
    fed chunk after chunk has that delay once, at the stream's start: the payloads join into
    one gapless stream. The price is state: a payload holds the frames complete so far, and
    the samples of the last, unfinished frame (with the encoder's look-ahead, < 2 frames) come
    out with the next payload, or with `finish`. Not thread-safe: one caller at a time.
    """

    def __init__(self, enc: AvEncoding, sample_rate: int) -> None:
        import av

        if enc.stream_options is None or enc.target_rate(sample_rate) != sample_rate:
            # Resampling chunk by chunk would put a filter edge at every boundary.
            raise EncodeError(f"{enc.name} has no continuous stream at {sample_rate} Hz")
        self.name = enc.name
        self.sample_rate = sample_rate
        try:
            context = cast("av.audio.codeccontext.AudioCodecContext", av.CodecContext.create(enc.codec, "w"))
            context.sample_rate = sample_rate
            context.layout = "mono"
            context.format = "flt"
            if enc.bit_rate:
                context.bit_rate = enc.bit_rate
            context.options = {**enc.codec_options, **enc.stream_options}
            context.open()
        except av.FFmpegError as err:
            raise EncodeError(f"{enc.name} stream encoder failed to open: {err}") from err
        self._context = context
        self._pts = 0
        self._finished = False

    def feed(self, samples: np.ndarray) -> bytes:
        """Encode the next mono samples (int16 or float32 in [-1, 1]); the frames completed."""
        import av

        if self._finished:
            raise EncodeError(f"{self.name} stream is finished")
        audio = as_float32(samples).astype(np.float32)
        if not len(audio):
            return b""
        frame = av.AudioFrame.from_ndarray(audio.reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = self.sample_rate
        frame.pts = self._pts
        self._pts += len(audio)
        try:
            return b"".join(bytes(packet) for packet in self._context.encode(frame))
        except av.FFmpegError as err:
            raise EncodeError(f"{self.name} encoding failed: {err}") from err

    def finish(self) -> bytes:
        """The samples still held back, as the stream's last frames (the stream ends)."""
        import av

        if self._finished:
            return b""
        self._finished = True
        try:
            return b"".join(bytes(packet) for packet in self._context.encode(None))
        except av.FFmpegError as err:
            raise EncodeError(f"{self.name} encoding failed: {err}") from err


def decode(data: bytes, demuxer: str, name: str, sample_rate: int | None = None) -> tuple[np.ndarray, int]:
    """Decode a file (chained Ogg and concatenated MP3 included) to float32 mono.

    Args:
        data: the encoded bytes (empty: no samples).
        demuxer: FFmpeg's demuxer (wav, mp3, ogg, flac).
        name: the format's name (in error messages).
        sample_rate: the rate reported for empty data.
    Returns:
        (samples float32 in [-1, 1], sample_rate).
    Raises:
        DecodeError.
    """
    if not data:
        return np.zeros(0, np.float32), sample_rate or 0  # an empty chunk (no samples)
    import av

    pieces: list[np.ndarray] = []
    rate = 0
    try:
        with av.open(io.BytesIO(data), mode="r", format=demuxer) as container:
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
        raise DecodeError(f"cannot decode {name}: {err}") from err
    if not pieces:
        raise DecodeError(f"no {name} audio frames in {len(data)} bytes")
    return np.concatenate(pieces), rate
