"""Small builders of valid contract objects for the pure-module tests (no Kafka, no model)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from streamtts.schemas import FilePart, PcmChunk, RequestContext, Segment, TTSRequest


def request(text: str = "Hello there. How are you?", **kw: object) -> TTSRequest:
    return TTSRequest.new(text, **kw)  # type: ignore[arg-type]


def segment(req: TTSRequest, seq: int = 0, total: int = 1, text: str = "Hello.", lang: str = "en") -> Segment:
    return Segment(
        request_id=req.request_id,
        seq=seq,
        total=total,
        last=seq == total - 1,
        text=text,
        lang=lang,  # type: ignore[arg-type]
        request=RequestContext.of(req),
        segmented_at=datetime.now(UTC),
    )


def pcm_chunk(
    req: TTSRequest,
    seq: int,
    total: int,
    *,
    part: int = 0,
    last_part: bool = True,
    samples: int = 4,
    pcm: np.ndarray | None = None,
    sample_rate: int = 24000,
) -> PcmChunk:
    """A PCM chunk of `pcm` (int16 samples) or, without it, `samples` samples that say which
    chunk they are (seq * 10 + part)."""
    return PcmChunk(
        request_id=req.request_id,
        seq=seq,
        total=total,
        part=part,
        last_part=last_part,
        last=seq == total - 1 and last_part,
        lang="en",
        voice_used="en_joe",
        sample_rate=sample_rate,
        pcm=(np.full(samples, seq * 10 + part, dtype="<i2") if pcm is None else pcm.astype("<i2")).tobytes(),
        request=RequestContext.of(req),
        synthesized_at=datetime.now(UTC),
    )


def file_part(req: TTSRequest, seq: int, total: int, **kw: Any) -> FilePart:
    """The sink's record of `pcm_chunk(req, seq, total, **kw)`: a file part carrying its PCM
    (what the encode stage writes for a format whose file is encoded from the PCM)."""
    from streamtts.processors.encode.stage import file_part as part_of  # processors: above schemas

    return part_of(pcm_chunk(req, seq, total, **kw), "pcm", b"", "alone")
