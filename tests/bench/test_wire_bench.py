"""The wire measurement runs on chunks without the model and compares like with like."""

from __future__ import annotations

from streamtts.bench.wire_bench import measure, table
from tests import factories


def test_both_formats_are_measured_on_the_same_records() -> None:
    req = factories.request()
    chunks = [factories.pcm_chunk(req, seq, 3, samples=24000) for seq in range(3)]
    rows = measure(chunks, formats=("mp3",))
    assert [(r.topic, r.wire_format) for r in rows] == [
        ("tts.pcm", "v1"),
        ("tts.pcm", "cloudevents"),
        ("tts.audio (mp3)", "v1"),
        ("tts.audio (mp3)", "cloudevents"),
    ]
    by = {(r.topic, r.wire_format): r for r in rows}
    assert by[("tts.pcm", "cloudevents")].bytes_per_audio_s < 0.8 * by[("tts.pcm", "v1")].bytes_per_audio_s
    assert all(r.records == 3 for r in rows)
    assert "| tts.pcm | cloudevents |" in table(rows)
