"""Speech-core benchmark (not a test): our Kokoro vs kokoro-onnx 0.6.1 on the same model, voice,
phonemes and thread count, plus our Piper engine, G2P cost, load/warm-up time and peak RSS.

    PYTHONPATH=. python -m streamtts.bench.speech_bench [--threads 2] [--repeats 3]

Prints a Markdown table and writes results/speech_bench.json. kokoro-onnx needs files on disk:
the model and voices are written to the project's ignored .local/bench/ folder (benchmark only).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import streamtts.processors.synthesize  # noqa: F401  (disables onnxruntime telemetry before any import)

ROOT = Path(__file__).resolve().parent.parent
SENTENCES: dict[str, list[str]] = {
    "en": [
        "The quick brown fox jumps over the lazy dog.",
        "Streaming speech should start playing before the whole text is ready.",
        "Please confirm your appointment for Tuesday morning.",
    ],
    "zh": [
        "您好，欢迎使用流式语音合成服务。",
        "今天的天气很好，我们去公园散步吧。",
        "请在下周二之前确认您的预约。",
    ],
    "ja": ["今日は良い天気ですね。", "東京タワーに行きました。"],
}
PARAGRAPH = (
    "Event-driven systems decouple producers from consumers. A request enters the pipeline, "
    "is segmented into clauses, and each clause is synthesized as soon as possible. The first "
    "audio chunk leaves quickly, while later chunks are produced in the background, so that a "
    "listener hears speech long before the whole paragraph has been rendered."
)
VOICE = "jm_kumo"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "p99": pct(values, 99), "n": len(values)}


def timed_stream(
    make: Callable[[], Iterator[Any]], duration: Callable[[Any], float]
) -> tuple[float, float, float]:
    """(first-item latency, total time, audio seconds) of one streamed synthesis."""
    started = time.perf_counter()
    first = None
    audio = 0.0
    for item in make():
        if first is None:
            first = time.perf_counter() - started
        audio += duration(item)
    return first or 0.0, time.perf_counter() - started, audio


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from streamtts.processors.direct import synthesize_text
    from streamtts.processors.synthesize.engine import make_session
    from streamtts.processors.synthesize.kokoro import KokoroEngine, bundled_voice_packs, read_model_bytes
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.processors.synthesize.synthesizer import Synthesizer

    results: dict[str, Any] = {"threads": args.threads, "repeats": args.repeats, "voice": VOICE}

    # 1. load and warm-up (our engines)
    t0 = time.perf_counter()
    registry = VoiceRegistry(threads=args.threads)
    kokoro = registry.engine(registry.spec(VOICE))
    results["kokoro_load_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    registry.warm_up((VOICE,), ("zh", "en", "ja"))
    results["kokoro_warmup_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    piper = registry.engine(registry.spec("en_joe"))
    results["piper_load_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    piper.warm_up()
    results["piper_warmup_s"] = time.perf_counter() - t0
    results["rss_after_load_mb"] = rss_mb()
    synth = Synthesizer(registry)
    spec = registry.spec(VOICE)
    assert isinstance(kokoro, KokoroEngine)

    # 2. G2P per language (warm)
    g2p: dict[str, dict[str, float]] = {}
    for lang, sentences in SENTENCES.items():
        times = []
        for _ in range(args.repeats):
            for s in sentences:
                t0 = time.perf_counter()
                kokoro.phonemize(s, lang)
                times.append((time.perf_counter() - t0) * 1000)
        g2p[lang] = summary(times)
    results["g2p_ms"] = g2p

    # 3. kokoro-onnx on the same model bytes, voice pack, phonemes and threads
    from kokoro_onnx import Kokoro

    local = ROOT / ".local" / "bench"
    local.mkdir(parents=True, exist_ok=True)
    model_path = local / "kokoro-v1.0.int8.onnx"
    if not model_path.exists():
        model_path.write_bytes(read_model_bytes())
    voices_path = local / "voices.npz"
    if not voices_path.exists():
        import numpy as np

        np.savez(voices_path, **bundled_voice_packs())  # type: ignore[arg-type]  # stub types **kwds as flags
    t0 = time.perf_counter()
    peer = Kokoro.from_session(make_session(str(model_path), threads=args.threads), str(voices_path))
    results["kokoro_onnx_load_s"] = time.perf_counter() - t0

    rows: dict[str, dict[str, list[float]]] = {}

    def record(name: str, first: float, total: float, audio: float) -> None:
        row = rows.setdefault(name, {"first": [], "total": [], "rtf": []})
        row["first"].append(first)
        row["total"].append(total)
        row["rtf"].append(total / audio if audio else float("nan"))

    for _ in range(args.repeats):
        for lang, sentences in SENTENCES.items():
            for s in sentences:
                record(
                    f"ours kokoro {lang}",
                    *timed_stream(
                        partial(synthesize_text, synth, s, lang_hint=lang, voice_id=VOICE),
                        lambda pair: pair[1].duration_s,
                    ),
                )
                phonemes = kokoro.phonemize(s, lang)

                def peer_once(phonemes: str = phonemes) -> Iterator[Any]:
                    audio, rate = peer.create(phonemes, spec.style, is_phonemes=True)
                    yield len(audio) / rate

                record(f"kokoro-onnx {lang}", *timed_stream(peer_once, lambda d: d))
        for s in SENTENCES["en"]:
            record(
                "ours piper en",
                *timed_stream(
                    partial(synthesize_text, synth, s, lang_hint="en", voice_id="en_joe"),
                    lambda pair: pair[1].duration_s,
                ),
            )
    # 4. long paragraph: first chunk vs whole utterance
    for _ in range(max(1, args.repeats // 2)):
        record(
            "ours kokoro paragraph",
            *timed_stream(
                lambda: synthesize_text(synth, PARAGRAPH, lang_hint="en", voice_id=VOICE),
                lambda pair: pair[1].duration_s,
            ),
        )
        record(
            "ours piper paragraph",
            *timed_stream(
                lambda: synthesize_text(synth, PARAGRAPH, lang_hint="en", voice_id="en_joe"),
                lambda pair: pair[1].duration_s,
            ),
        )
        whole = kokoro.phonemize(PARAGRAPH, "en")

        def peer_para(whole: str = whole) -> Iterator[Any]:
            audio, rate = peer.create(whole, spec.style, is_phonemes=True)
            yield len(audio) / rate

        record("kokoro-onnx paragraph", *timed_stream(peer_para, lambda d: d))

    results["runs"] = {name: {k: summary(v) for k, v in row.items()} for name, row in rows.items()}
    results["peak_rss_mb"] = rss_mb()

    out = ROOT / "results" / "speech_bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))

    print(f"threads={args.threads} repeats={args.repeats} voice={VOICE}\n")
    print("| run | first chunk s (median / p99) | total s (median / p99) | RTF (median / p99) |")
    print("|---|---|---|---|")
    for name, row in results["runs"].items():
        cells = [f"{row[k]['median']:.3f} / {row[k]['p99']:.3f}" for k in ("first", "total", "rtf")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\n| G2P | median ms | p99 ms |\n|---|---|---|")
    for lang, stats in g2p.items():
        print(f"| {lang} | {stats['median']:.2f} | {stats['p99']:.2f} |")
    print(
        f"\nload: kokoro {results['kokoro_load_s']:.2f} s (warm-up zh/en/ja "
        f"{results['kokoro_warmup_s']:.2f} s), piper {results['piper_load_s']:.2f} s "
        f"(warm-up {results['piper_warmup_s']:.2f} s), kokoro-onnx session "
        f"{results['kokoro_onnx_load_s']:.2f} s; RSS after load "
        f"{results['rss_after_load_mb']:.0f} MB, peak {results['peak_rss_mb']:.0f} MB"
        f"\nwrote {out.relative_to(ROOT)}"
    )


if __name__ == "__main__":
    main()
