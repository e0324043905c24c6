"""Rendered segment → PCM chunk messages small enough for Kafka (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from streamtts.audio.pcm import to_int16
from streamtts.processors.synthesize.renderer import RenderedSegment
from streamtts.schemas import PcmChunk, Segment


def pcm_chunks(segment: Segment, rendered: RenderedSegment, chunk_max_ms: int) -> list[PcmChunk]:
    """Split the segment's audio into parts of at most `chunk_max_ms` (at least one part)."""
    pcm = to_int16(rendered.samples).astype("<i2")
    per_part = max(1, int(rendered.sample_rate * chunk_max_ms / 1000))
    bounds = list(range(0, len(pcm), per_part)) or [0]
    now = datetime.now(UTC)
    parts = []
    for i, start in enumerate(bounds):
        last_part = i == len(bounds) - 1
        parts.append(
            PcmChunk(
                request_id=segment.request_id,
                seq=segment.seq,
                total=segment.total,
                part=i,
                last_part=last_part,
                last=segment.last and last_part,
                lang=segment.lang,
                voice_used=rendered.voice_used,
                sample_rate=rendered.sample_rate,
                pcm=pcm[start : start + per_part].tobytes(),
                degradation=rendered.degradation if i == 0 else None,
                synth_ms=rendered.synth_ms if i == 0 else 0.0,
                cache=rendered.cache,
                request=segment.request,
                synthesized_at=now,
            )
        )
    return parts
