"""How much first audio varies over a mix with no load at all: the floor under any tail ratio.

`python -m streamtts.bench.first_span_spread [--voice jm_kumo] [--first-max 40,24,16]` renders
the first span of every text of the customer-service mix the voice speaks, in this process, one
at a time, with one intra-op thread (what a first lane gives a first span), once per first-span
budget, and prints per budget: p50 / p90 / p99 / max of the time from call to the first span's
audio, p99 ÷ p50, and the first spans' length in audio seconds.

Why: `streamtts bench --tail` divides each load's p99 first audio by the idle p50. No scheduler
makes a request faster than an idle worker renders it, so the ratio at any load cannot fall below
the idle mix's own p99 ÷ p50; this measures that floor with every text of the mix, not the
handful an idle run sends. The language detector is loaded first, as the segment stage does at
start, and one first span is rendered untimed, so no measured call pays for a first use.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streamtts.errors import ConfigError

RATE = 24_000
"""The request's default output rate: Piper's 22.05 kHz is resampled to it, as in the pipeline
(the warm-up span must resample too: the resampler's first use imports scipy.signal, ~1.4 s)."""


@dataclass(frozen=True)
class Spread:
    first_max_chars: int
    texts: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    audio_p50_s: float
    audio_max_s: float

    @property
    def ratio(self) -> float:
        """p99 ÷ p50: the lowest p99 ÷ idle p50 any load can show for this mix."""
        return self.p99_ms / self.p50_ms


def spread(first_max_chars: int, first_ms: Sequence[float], audio_s: Sequence[float]) -> Spread:
    """Summarize one budget's first-span times (ms) and audio lengths (s), one per text."""
    if not first_ms or len(first_ms) != len(audio_s):
        raise ValueError("need one time and one audio length per text, at least one text")
    ms = np.asarray(first_ms, dtype=float)
    return Spread(
        first_max_chars=first_max_chars,
        texts=len(ms),
        p50_ms=float(np.percentile(ms, 50)),
        p90_ms=float(np.percentile(ms, 90)),
        p99_ms=float(np.percentile(ms, 99)),
        max_ms=float(ms.max()),
        audio_p50_s=float(np.median(audio_s)),
        audio_max_s=float(max(audio_s)),
    )


def table(voice: str, rows: Sequence[Spread], threads: int = 1) -> str:
    plural = "s" * (threads > 1)
    out = [
        f"First audio of every text of the mix, no load ({voice}, {threads} intra-op thread{plural}):",
        "",
        "| first_max_chars | texts | p50 ms | p90 ms | p99 ms | max ms | p99 ÷ p50 | audio s p50 / max |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    out += [
        f"| {r.first_max_chars} | {r.texts} | {r.p50_ms:.0f} | {r.p90_ms:.0f} | {r.p99_ms:.0f} | "
        f"{r.max_ms:.0f} | **{r.ratio:.2f}** | {r.audio_p50_s:.2f} / {r.audio_max_s:.2f} |"
        for r in rows
    ]
    return "\n".join(out)


def measure(voice: str, budgets: Sequence[int], threads: int = 1) -> list[Spread]:
    """Render each text's first span once per budget (the model loaded and warmed first)."""
    from streamtts.bench.direct import DirectSynth
    from streamtts.bench.workloads import load_texts, speakable
    from streamtts.processors.direct import synthesize_text
    from streamtts.processors.segment.langid import warm_identification
    from streamtts.processors.segment.span_limits import DEFAULT_FIRST_MIN_CHARS, SpanLimits

    warm_identification()
    direct = DirectSynth(threads, [voice])
    items = speakable(load_texts("customer_service"), direct.voice_languages(voice))
    if not items:
        raise ConfigError(f"voice {voice!r} speaks none of the customer-service texts")
    # One untimed first span, so no measured call pays for a path's first use.
    first = items[0]
    next(
        synthesize_text(
            direct.synth, first.text, lang_hint=first.request_language, voice_id=voice, sample_rate=RATE
        )
    )
    rows = []
    for budget in budgets:
        times: list[float] = []
        audio: list[float] = []
        for n, item in enumerate(items, 1):
            if n % 10 == 0:
                print(f"first_max_chars {budget}: {n}/{len(items)} texts", file=sys.stderr, flush=True)
            started = time.monotonic()
            spans = synthesize_text(
                direct.synth,
                item.text,
                lang_hint=item.request_language,
                voice_id=voice,
                sample_rate=RATE,
                limits=SpanLimits(
                    first_max_chars=budget, first_min_chars=min(DEFAULT_FIRST_MIN_CHARS, budget)
                ),
            )
            _segment, chunk = next(spans)  # only the first span is rendered
            times.append((time.monotonic() - started) * 1000)
            audio.append(chunk.duration_s)
        rows.append(spread(budget, times, audio))
        print(f"first_max_chars {budget}: {len(items)} texts", file=sys.stderr, flush=True)
    return rows


def _budgets(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        raise ConfigError(f"--first-max takes comma-separated integers, got {text!r}") from err
    if not values or any(v < 4 for v in values):
        raise ConfigError("--first-max values must be at least 4 (the segmenter's smallest first span)")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamtts.bench.first_span_spread", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--voice", default="jm_kumo", help="voice (default jm_kumo, Kokoro)")
    parser.add_argument(
        "--first-max", default="40", help="first-span budgets in characters, e.g. 40,24,16 (default 40)"
    )
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1, a first lane)")
    args = parser.parse_args(argv)
    try:
        budgets = _budgets(args.first_max)
        if args.threads < 1:
            raise ConfigError("--threads must be at least 1")
        rows = measure(args.voice, budgets, args.threads)
    except (ConfigError, ValueError) as err:  # ValueError: an unknown or malformed voice
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(table(args.voice, rows, args.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
