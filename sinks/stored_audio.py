"""The bytes of a request's stored audio file, from what its parts carried (pure, CPU-bound:
the storage writer runs it on its pool).

Three ways, and the result's `storage.made_from` says which:
- "streamed": the frames that were streamed are the file: joined (raw samples, WAV) or, for
  one continuous MP3 stream, headed by an Info frame. No encode: the request was encoded once.
- "pcm": encoded from the PCM, as a whole file (Opus, FLAC: their chunks do not join into a
  valid file; or the request came as PCM chunks).
- "decoded": streamed frames that cannot be joined (a stream reopened after a failover, or
  one a cancel left unfinished) are decoded, fitted to the samples each run of parts held, and
  encoded once more. A rare path; it costs a second generation of lossy coding.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Literal

import numpy as np

from streamtts.audio import formats
from streamtts.audio.codecs import assemble, decode_audio, encode_file
from streamtts.audio.exceptions import DecodeError
from streamtts.audio.pcm import to_int16
from streamtts.sinks.assembler import AssembledRequest, StreamedPart

MadeFrom = Literal["streamed", "pcm", "decoded"]

PRIMING = {"mp3": 576 + 529}
"""Samples a decoder puts before a stream's first sample where the file has no header to
say so (LAME's encoder delay and the MP3 decoder's own): dropped when frames are decoded."""


def stored_audio(req: AssembledRequest) -> tuple[bytes, MadeFrom]:
    """The stored file of `req` in its format, and how it was made.

    Raises:
        EncodeError, DecodeError: the audio cannot be encoded (or its frames decoded).
    """
    fmt, rate, codec_name = req.ctx.format, req.sample_rate, req.ctx.codec
    if not req.streamed or all(p.carries == "pcm" for p in req.streamed):
        return encode_file(req.samples, rate, fmt, codec=codec_name), "pcm"
    codec = formats.get(fmt)
    parts = [p for p in req.streamed if p.audio]
    if all(p.carries == "frames" for p in parts):
        if codec.joins_losslessly:
            return assemble([p.audio for p in parts], fmt, sample_rate=rate), "streamed"
        if codec.file_from_stream is not None and not req.cancelled and one_stream(parts):
            try:
                return codec.file_from_stream(
                    b"".join(p.audio for p in parts), req.n_samples, rate
                ), "streamed"
            except DecodeError:
                pass  # not one whole stream after all: decoded below
    return encode_file(_decoded(req.streamed, fmt, rate), rate, fmt, codec=codec_name), "decoded"


def one_stream(parts: Sequence[StreamedPart]) -> bool:
    """Whether the parts (those with audio, in order) are one continuous stream's payloads:
    one chunk encoded alone, or a stream opened at the first and continued to the last."""
    uses = [p.stream for p in parts]
    if uses == ["alone"]:
        return True
    return bool(uses) and uses[0] == "opened" and all(use == "continued" for use in uses[1:])


def _decoded(parts: Sequence[StreamedPart], fmt: str, rate: int) -> np.ndarray:
    """The request's samples: PCM parts as they are, each run of frames decoded and fitted to
    the samples its parts held (the priming dropped, the end cut or padded)."""
    pieces: list[np.ndarray] = []
    for carries, run in groupby(parts, key=lambda p: p.carries):
        held = list(run)
        n = sum(p.n_samples for p in held)
        if carries == "pcm":
            pieces.append(np.frombuffer(b"".join(p.audio for p in held), dtype="<i2"))
        elif carries == "frames" and n:
            decoded, _ = decode_audio(b"".join(p.audio for p in held), fmt, sample_rate=rate)
            samples = to_int16(decoded)
            lead = min(max(0, len(samples) - n), PRIMING.get(fmt, 0))
            fitted = samples[lead : lead + n]
            pieces.append(np.pad(fitted, (0, n - len(fitted))))
        else:
            pieces.append(np.zeros(n, np.int16))  # no audio carried: silence of its length
    return np.concatenate(pieces) if pieces else np.zeros(0, np.int16)
