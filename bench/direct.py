"""The baseline: the same texts synthesized in this process by the same engine and thread
budget, like `streamtts synth` (segment → synthesize → encode each chunk), one at a time —
exactly what one synthesize worker does (one inference at a time), minus Kafka and the stages.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from streamtts.bench.stats import RequestRecord
from streamtts.bench.workloads import WorkItem

REQUEST_SAMPLE_RATE = 24_000
"""The request contract's default output rate; the pipeline resamples to it, so the baseline does."""


class DirectSynth:
    """Loads and warms the engines once; `run` times each text from call to first chunk/last chunk."""

    def __init__(self, threads: int, voices: Sequence[str]) -> None:
        import streamtts.processors.synthesize  # noqa: F401  (disables onnxruntime telemetry first)
        from streamtts.processors.synthesize.registry import VoiceRegistry
        from streamtts.processors.synthesize.synthesizer import Synthesizer

        self.registry = VoiceRegistry(threads=threads)
        # The same warm-up as a worker (build_renderer), so neither side pays a cold phonemizer.
        self.registry.warm_up(tuple(voices), langs=("zh", "en", "ja", "ko"))
        self.synth = Synthesizer(self.registry)

    def voice_languages(self, voice: str) -> frozenset[str]:
        return self.registry.spec(voice).languages

    def one(self, item: WorkItem, voice: str, fmt: str = "mp3") -> RequestRecord:
        from streamtts.audio.codecs import encode_chunk
        from streamtts.processors.direct import synthesize_text

        rec = RequestRecord("direct", len(item.text), item.lang, item.kind, sent_at=time.monotonic())
        serial = 0
        for _span, chunk in synthesize_text(
            self.synth,
            item.text,
            lang_hint=item.request_language,
            voice_id=voice,
            sample_rate=REQUEST_SAMPLE_RATE,
        ):
            serial += 1
            encode_chunk(chunk.samples, chunk.sample_rate, fmt, serial=serial)
            if rec.first_chunk_at is None:
                rec.first_chunk_at = time.monotonic()
            rec.audio_s += chunk.duration_s
            rec.degraded += int(chunk.voice_id != self.registry.spec(voice).voice_id)
        rec.audio_done_at = rec.result_at = time.monotonic()
        return rec

    def run(
        self,
        items: Sequence[WorkItem],
        voice: str,
        *,
        deadline: float,
        fmt: str = "mp3",
        say: Callable[[str], None] | None = None,
    ) -> list[RequestRecord]:
        # Warm the exact path once (first mp3 encode, first call of this voice), untimed.
        self.one(items[0], voice, fmt)
        out = []
        for n, item in enumerate(items, 1):
            if time.monotonic() > deadline:
                break
            out.append(self.one(item, voice, fmt))
            if say and n % 10 == 0:
                say(f"{n}/{len(items)} texts")
        return out
