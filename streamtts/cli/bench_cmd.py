"""`streamtts bench`: load-test the pipeline against the in-process baseline (see bench/run.py).

Module-level imports stay light: the model and Kafka stacks are imported inside `run`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from streamtts.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS_PERF = ROOT / "docs" / "perf"
WORKLOAD_CHOICES = ("customer_service", "long_form", "burst")
SECTIONS = ("pipeline", "guarantees", "scale_out", "wire", "encode", "tracing")


HELP = "benchmark the pipeline (TTFA, throughput, capacity) against direct synthesis"
DESCRIPTION = (
    "Start pipeline workers as processes, drive them with open- or closed-loop load, and "
    "compare with the same texts synthesized in-process. Needs Kafka + MinIO "
    "(`streamtts infra up`). Writes result.json, report.md and PNG plots."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="small samples, core sections only (< 5 min)")
    p.add_argument(
        "--voice",
        action="append",
        default=None,
        help="voice to bench; repeat for several (default: en_joe and jm_kumo; the first is primary)",
    )
    p.add_argument(
        "--workload",
        choices=WORKLOAD_CHOICES,
        default=None,
        help="with --rate/--concurrency: run one custom load of this workload instead of the suite",
    )
    p.add_argument("--rate", type=float, default=None, help="custom open-loop load: Poisson requests/s")
    p.add_argument("--concurrency", type=int, default=None, help="custom closed-loop load: clients in flight")
    p.add_argument(
        "--duration", type=float, default=None, help="custom load: seconds of sending (default 30)"
    )
    p.add_argument(
        "--threads", type=int, default=2, help="inference threads, pipeline and baseline (default 2)"
    )
    p.add_argument(
        "--guarantees",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="exactly-once vs at-least-once side by side (default: on in a full run, off with --quick)",
    )
    p.add_argument(
        "--scale-out",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="1 synthesize worker × 2 threads vs 2 × 1 (default: on in a full run, off with --quick)",
    )
    p.add_argument(
        "--tail",
        action="store_true",
        help=(
            "first audio against load: saturation, then Poisson loads at 20/50/80 %% of it, "
            "scheduler fifo vs lanes side by side, per voice (instead of the other sections)"
        ),
    )
    p.add_argument(
        "--tail-requests",
        type=int,
        default=None,
        help="with --tail: requests per offered load (default 40/120 Piper, 8/30 Kokoro, quick/full)",
    )
    p.add_argument(
        "--tail-setups",
        default=None,
        help="with --tail: comma-separated setups (default all: fifo, lanes2x1, lanes2x1-first2-encode1,"
        " lanes2x1-first2; lanes2x1-first2-sink1[-nice10], the defaults with the sink in its own process"
        " [at nice 10], run when named; setups run in the order named, the first is the baseline whose"
        " saturation sets the loads)",
    )
    p.add_argument(
        "--tail-loads",
        default=None,
        help="with --tail: comma-separated shares of saturation (default 0.2,0.5,0.8; 0.5,0.8 for a"
        " slow engine such as Kokoro)",
    )
    p.add_argument(
        "--sections",
        default=None,
        help=(
            "comma-separated subset of pipeline,guarantees,scale_out,wire,encode,tracing (default:"
            " by --quick and the flags; wire, mp3 encoded twice vs once, v1 records and pcm without"
            " encoders at capacity; encode, twice vs once only, each twice in ABBA order; tracing,"
            " spans at 100 %% sampling vs none (needs `infra up --tracing`): run only when named)"
        ),
    )
    p.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="time budget (default 4.5 quick, ~17 full; +7 or +10 per named wire, encode or tracing section)",
    )
    p.add_argument("--seed", type=int, default=7, help="RNG seed of text mixes and arrivals (default 7)")
    p.add_argument(
        "--out", type=Path, default=None, help="results folder (default results/bench/<timestamp>)"
    )
    p.add_argument("--publish", action="store_true", help=f"also copy report.md + PNGs to {DOCS_PERF}")
    p.add_argument(
        "--cache",
        action="store_true",
        help="only the render cache section: off / cold / warm on a repetitive customer-service mix",
    )
    p.add_argument(
        "--llm-stream",
        action="store_true",
        help="only the streamed-text section: customer-service replies (en, zh, ja) written token "
        "by token at 10/25/50 tokens/s (--quick: 8, 25) over the gateway's WebSocket (one streamed "
        "utterance per turn, and one request per sentence) and over Kafka (text deltas); first "
        "audio after the first token, clause and sentence, last audio after the end",
    )
    p.add_argument(
        "--barge-in",
        action="store_true",
        help="only the barge-in section: voice-agent sessions over the gateway's WebSocket, "
        "interrupted at a random point (--barge-in-mode pipeline: long answers on Kafka, half "
        "cancelled at first audio)",
    )
    p.add_argument(
        "--barge-in-mode",
        choices=("agents", "pipeline"),
        default="agents",
        help="with --barge-in: agent sessions through the gateway (default), or the pipeline alone",
    )
    p.add_argument(
        "--sessions", type=int, default=3, help="with --barge-in: concurrent agent sessions (default 3)"
    )
    p.add_argument(
        "--cache-modes",
        default="off,cold,warm",
        help="with --cache: which of off,cold,warm to run (default all)",
    )
    p.set_defaults(func=run)


def _import_path() -> None:
    """`bench/` is repo tooling, not part of the installed packages: import it from this checkout."""
    import importlib.util

    if importlib.util.find_spec("bench") is None and (ROOT / "bench" / "run.py").exists():
        sys.path.insert(0, str(ROOT))


def _check(args: argparse.Namespace) -> None:
    if args.rate is not None and args.rate <= 0:
        raise ConfigError(f"--rate must be > 0, got {args.rate:g}")
    if args.concurrency is not None and args.concurrency < 1:
        raise ConfigError(f"--concurrency must be >= 1, got {args.concurrency}")
    if args.rate is not None and args.concurrency is not None:
        raise ConfigError("give --rate (open loop) or --concurrency (closed loop), not both")
    if args.duration is not None and args.duration <= 0:
        raise ConfigError(f"--duration must be > 0, got {args.duration:g}")
    if args.threads < 1:
        raise ConfigError(f"--threads must be >= 1, got {args.threads}")
    if args.tail_requests is not None and (args.tail_requests < 1 or not args.tail):
        raise ConfigError("--tail-requests takes a count >= 1, with --tail")
    if (args.tail_setups is not None or args.tail_loads is not None) and not args.tail:
        raise ConfigError("--tail-setups and --tail-loads go with --tail")
    if args.tail_setups is not None:
        from streamtts.bench.tail import setups

        try:
            setups(_names(args.tail_setups))
        except ValueError as err:
            raise ConfigError(str(err)) from None
    if args.tail_loads is not None:
        shares = _shares(args.tail_loads)
        if not shares or any(not 0 < s < 1.5 for s in shares):
            raise ConfigError(f"--tail-loads takes shares of saturation in (0, 1.5); got {args.tail_loads!r}")
    if args.max_minutes is not None and args.max_minutes <= 0:
        raise ConfigError(f"--max-minutes must be > 0, got {args.max_minutes:g}")
    if args.sections is not None:
        unknown = set(args.sections.split(",")) - set(SECTIONS)
        if unknown or not args.sections:
            raise ConfigError(f"--sections takes {','.join(SECTIONS)}; got {args.sections!r}")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {args.out} exists and is not a directory")


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _shares(text: str) -> list[float]:
    try:
        return [float(share) for share in _names(text)]
    except ValueError:
        raise ConfigError(f"--tail-loads takes comma-separated numbers; got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    _check(args)
    voices = tuple(dict.fromkeys(args.voice or ("en_joe", "jm_kumo")))

    from streamtts.processors.synthesize.exceptions import UnknownVoiceError
    from streamtts.processors.synthesize.registry import VoiceRegistry

    registry = VoiceRegistry(threads=1)  # resolves ids only; loads no model
    for voice in voices:
        try:
            registry.spec(voice)
        except UnknownVoiceError as err:
            raise ConfigError(str(err)) from None

    if args.cache:
        return _cache_section(args, voices)
    if args.barge_in:
        return _barge_in_section(args, voices)
    if args.llm_stream:
        return _llm_stream_section(args)

    _import_path()
    from streamtts.bench.bench_plan import CustomLoad, Plan
    from streamtts.bench.plots import plot_all
    from streamtts.bench.report import markdown
    from streamtts.bench.report_json import write_json
    from streamtts.bench.run import run_bench

    custom = None
    if args.rate is not None or args.concurrency is not None or args.workload or args.duration:
        custom = CustomLoad(
            workload=args.workload or "customer_service",
            rate=args.rate,
            concurrency=args.concurrency or 4,
            duration_s=args.duration or (15 if args.quick else 30),
        )
    sections = set(args.sections.split(",")) if args.sections else None
    if sections is not None and "tracing" in sections:
        from streamtts.bench.tracing_bench import check_collector

        check_collector()  # before anything is measured, not when the section's turn comes
    plan = Plan.make(
        quick=args.quick,
        voices=voices,
        guarantees=False if args.tail else args.guarantees if sections is None else "guarantees" in sections,
        scale_out=False if args.tail else args.scale_out if sections is None else "scale_out" in sections,
        pipeline=not args.tail and (sections is None or "pipeline" in sections),
        wire=sections is not None and "wire" in sections,
        tracing=sections is not None and "tracing" in sections,
        encode=sections is not None and "encode" in sections,
        tail=args.tail,
        tail_requests=args.tail_requests,
        tail_setups=_names(args.tail_setups) if args.tail_setups else (),
        tail_loads=_shares(args.tail_loads) if args.tail_loads else (),
        budget_s=args.max_minutes * 60 if args.max_minutes else None,
        seed=args.seed,
        custom=custom,
        threads=args.threads,
    )
    out = args.out or ROOT / "results" / "bench" / time.strftime("%Y%m%d-%H%M%S")
    result = run_bench(plan, out)

    images = plot_all(result, out)
    write_json(result, out / "result.json")
    report = markdown(result, images)
    (out / "report.md").write_text(report)
    if args.publish:
        DOCS_PERF.mkdir(parents=True, exist_ok=True)
        for name in ("report.md", "result.json", *images):
            shutil.copy2(out / name, DOCS_PERF / name)
    print(report)
    print(
        f"[bench] done in {result.wall_s / 60:.1f} min → {out}"
        + (f" (copied to {DOCS_PERF})" if args.publish else ""),
        file=sys.stderr,
    )
    return 0


def _barge_in_section(args: argparse.Namespace, voices: tuple[str, ...]) -> int:
    import asyncio

    if args.barge_in_mode == "agents":
        return _barge_in_agents(args)

    from streamtts.bench.barge_in import VOICE_LANG, markdown, run_barge_in_bench
    from streamtts.bench.fresh_workers import ScenarioPlan

    _check_section_voices("--barge-in", voices, VOICE_LANG)
    rates = {"en_joe": args.rate or 0.8, "jm_kumo": args.rate or 0.12}
    duration = args.duration or (30.0 if args.quick else 90.0)
    out = _section_out(args, "barge-in")
    runs = asyncio.run(
        run_barge_in_bench(ScenarioPlan(voices, rates, duration, args.seed, out, threads=args.threads))
    )
    _publish_section(out, "barge-in", markdown(runs), [r.row() for r in runs])
    return 0 if all(r.row()["lost"] == 0 for r in runs) else 1


def _barge_in_agents(args: argparse.Namespace) -> int:
    import asyncio

    from streamtts.bench.barge_in_agents import agent_markdown, run_agent_bench

    if args.sessions < 1:
        raise ConfigError(f"--sessions must be >= 1, got {args.sessions}")
    duration = args.duration or (30.0 if args.quick else 60.0)
    out = _section_out(args, "barge-in-agents")
    stats = asyncio.run(run_agent_bench(args.sessions, duration, args.seed, out, threads=args.threads))
    _publish_section(out, "barge-in-agents", agent_markdown(stats, args.sessions, duration), stats.row())
    return 0 if stats.cancels and not stats.errors else 1


def _llm_stream_section(args: argparse.Namespace) -> int:
    import asyncio

    _import_path()
    from streamtts.bench.llm_stream import llm_stream_markdown, run_llm_stream_bench

    rates = (8.0, 25.0) if args.quick else (10.0, 25.0, 50.0)
    out = _section_out(args, "llm-stream")
    runs = asyncio.run(run_llm_stream_bench(rates, 1 if args.quick else 2, out, threads=args.threads))
    _publish_section(out, "llm-stream", llm_stream_markdown(runs), [r.row() for r in runs])
    return 0 if all(r.errors == 0 and r.after_first_word_ms for r in runs) else 1


def _cache_section(args: argparse.Namespace, voices: tuple[str, ...]) -> int:
    import asyncio

    from streamtts.bench.cache_bench import VOICE_LANG, markdown, run_cache_bench
    from streamtts.bench.fresh_workers import ScenarioPlan

    _check_section_voices("--cache", voices, VOICE_LANG)
    rates = {"en_joe": args.rate or 4.0, "jm_kumo": args.rate or 1.2}
    duration = args.duration or (30.0 if args.quick else 90.0)
    out = _section_out(args, "cache")
    modes = [m for m in args.cache_modes.split(",") if m]
    if not modes or set(modes) - {"off", "cold", "warm"}:
        raise ConfigError(f"--cache-modes takes off,cold,warm; got {args.cache_modes!r}")
    plan = ScenarioPlan(voices, rates, duration, args.seed, out, threads=args.threads)
    runs = asyncio.run(run_cache_bench(plan, modes))
    _publish_section(out, "cache", markdown(runs), [r.row() for r in runs])
    return 0 if all(r.summary.lost == 0 for r in runs) else 1


def _check_section_voices(flag: str, voices: tuple[str, ...], known: Mapping[str, str]) -> None:
    """A single-section bench runs only the voices it has texts for."""
    unknown = [v for v in voices if v not in known]
    if unknown:
        raise ConfigError(f"{flag} benches {', '.join(known)}; not {', '.join(unknown)}")


def _section_out(args: argparse.Namespace, name: str) -> Path:
    """The section's results folder (--out, else a timestamped one), created."""
    out: Path = args.out or Path("results") / "bench" / time.strftime(f"{name}-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _publish_section(
    out: Path, name: str, table: str, rows: Mapping[str, object] | Sequence[Mapping[str, object]]
) -> None:
    """The section's table as <name>.md and its rows (or one row) as <name>.json in `out`; the
    table on stdout."""
    (out / f"{name}.md").write_text(table + "\n", "utf-8")
    (out / f"{name}.json").write_text(json.dumps(rows, indent=1), "utf-8")
    print(table)
