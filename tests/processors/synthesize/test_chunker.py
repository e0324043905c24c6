"""Rendered audio → PCM chunk records: bounded parts, exact samples, order markers."""

from __future__ import annotations

import numpy as np

from streamtts.processors.synthesize.chunker import pcm_chunks
from streamtts.processors.synthesize.renderer import RenderedSegment
from tests.factories import request, segment


def test_long_audio_splits_into_bounded_parts_that_rejoin_exactly() -> None:
    req = request()
    seg = segment(req, seq=1, total=2)
    samples = np.sin(np.linspace(0, 200, 24_000 * 12)).astype(np.float32) * 0.5  # 12 s
    parts = pcm_chunks(seg, RenderedSegment(samples, 24_000, "jm_kumo", None, 5.0), chunk_max_ms=5000)
    assert [p.part for p in parts] == [0, 1, 2]
    assert [p.last_part for p in parts] == [False, False, True]
    assert [p.last for p in parts] == [False, False, True], "only the final part of the last segment"
    assert all(p.duration_ms <= 5000 for p in parts)
    joined = np.frombuffer(b"".join(p.pcm for p in parts), dtype="<i2")
    assert np.array_equal(joined, (samples * 32767).round().astype("<i2"))
    assert parts[0].synth_ms == 5.0 and parts[1].synth_ms == 0.0, "synthesis time is counted once"


def test_silence_still_yields_one_part() -> None:
    seg = segment(request())
    (only,) = pcm_chunks(seg, RenderedSegment(np.zeros(0, np.float32), 24_000, "x", None, 0.0), 5000)
    assert only.pcm == b"" and only.last and only.last_part


def test_blends_share_one_metric_label_and_breaker_class() -> None:
    from streamtts.processors.synthesize.registry import voice_class

    assert voice_class("jm_kumo") == "jm_kumo"
    assert {voice_class(f"jm_kumo:0.{i}+jf_alpha:0.{9 - i}") for i in range(1, 9)} == {"blend"}
