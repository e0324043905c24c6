"""`streamtts eval`: intelligibility of the pipeline next to the raw model (offline Whisper)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from streamtts.errors import ConfigError

HELP = "intelligibility check: raw model vs speech core vs pipeline, transcribed by Whisper"
DESCRIPTION = (
    "Renders a sentence set (default: the bundled 127 customer-service sentences in zh, "
    "en, ja, mixed zh/en — 48 of them with English glued to Chinese —, ko, es, it, pt, de, "
    "fr and hi, with codes, phone numbers, prices and dates) with the raw model "
    "(whole sentence, one voice), the speech core and the whole Kafka pipeline (voice auto), "
    "transcribes each with offline Whisper-base and reports CER/WER per language, clipping "
    "and discontinuities. The pipeline part starts the local stack if it is not running. "
    "--streamed adds the same sentences as streamed utterances (token by token, as an LLM "
    "writes) through the same pipeline, and their error minus the whole requests' per language."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set", type=Path, default=None, help="JSON Lines sentence set: {id, lang, text, expect?}"
    )
    p.add_argument(
        "--langs", default=None, help="comma-separated subset of zh,en,ja,mixed,ko,es,it,pt,de,fr,hi"
    )
    p.add_argument("--per-lang", type=int, default=None, help="at most N sentences per language")
    p.add_argument("--no-pipeline", action="store_true", help="skip the Kafka pipeline (raw and core only)")
    p.add_argument(
        "--streamed",
        action="store_true",
        help="also send each sentence through the pipeline as a streamed utterance, token by token "
        "(system 'streamed'), and print its error minus the whole request's per language",
    )
    p.add_argument(
        "--stream-wps",
        type=float,
        default=None,
        metavar="N",
        help="tokens (words; CJK: two characters) per second of --streamed (default 25, an LLM's pace)",
    )
    p.add_argument(
        "--stream-delay-ms",
        type=int,
        default=None,
        metavar="MS",
        help="--streamed utterances' max_buffer_delay_ms (default 1000): how long the first text "
        "waits for a clause boundary before the timer speaks it (the latency/quality knob)",
    )
    p.add_argument(
        "--first-min",
        default="",
        help="also run the core path with these first-span minimums, e.g. 0,24 (latency trade-off)",
    )
    p.add_argument("--threads", type=int, default=2, help="onnxruntime and Whisper threads (default 2)")
    p.add_argument(
        "--asr-leads",
        default="0",
        help="transcribe each rendering after these amounts of leading silence in ms and sum the "
        "scores, e.g. 0,150,300 (Whisper-base's error moves by ±0.03 with where speech starts; "
        "default 0: once, as rendered)",
    )
    p.add_argument("--out", type=Path, default=None, help="write the full report (every transcript) as JSON")
    p.add_argument(
        "--write-tiers",
        nargs="?",
        type=Path,
        const=Path("-"),
        default=None,
        metavar="PATH",
        help="record each language's error (pipeline, else core) in the measurements file the "
        "language table reads, from which the tiers follow (default PATH: the installed package's "
        "schemas/language_errors.json)",
    )
    p.add_argument(
        "--timestamps",
        action="store_true",
        help="word-timestamp accuracy instead: our word starts against Whisper's word alignment"
        " (zh, en, ja, mixed; the default set adds 32 plain sentences to the 38 of those languages)",
    )
    p.set_defaults(func=_run)


def _ints(text: str, option: str = "--first-min") -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        raise ConfigError(f"{option} takes comma-separated integers, got {text!r}") from err
    if any(v < 0 for v in values):
        raise ConfigError(f"{option} values must be ≥ 0")
    return values


def _run(args: argparse.Namespace) -> int:
    from streamtts.bench.speech_eval import EvalPlan, format_table, load_sentences, report_json, run_eval

    if args.threads < 1 or (args.per_lang is not None and args.per_lang < 1):
        raise ConfigError("--threads and --per-lang must be ≥ 1")
    if args.out and not args.out.parent.exists():
        raise ConfigError(f"output directory {args.out.parent} does not exist")
    if args.out and args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a directory: give the report's file name")
    langs = [v.strip() for v in args.langs.split(",") if v.strip()] if args.langs else None
    if args.timestamps:
        return _run_timestamps(args, langs)
    stream_wps = _stream_pace(args)
    sentences = load_sentences(args.set, langs, args.per_lang)
    plan = EvalPlan(
        tuple(sentences),
        pipeline=not args.no_pipeline,
        first_mins=_ints(args.first_min),
        threads=args.threads,
        lead_ms=_ints(args.asr_leads, "--asr-leads") or (0,),
        stream_tokens_per_s=stream_wps,
        stream_delay_ms=_stream_delay(args),
    )
    target = _tiers_path(args.write_tiers) if args.write_tiers is not None else None
    rows, renderings = run_eval(plan)
    print(format_table(rows))
    if target is not None:
        from datetime import UTC, datetime

        from streamtts.bench.speech_eval import write_measurements

        written = write_measurements(target, rows, today=datetime.now(UTC).date().isoformat())
        print(f"measured errors of {', '.join(sorted(written)) or 'no table language'} written to {target}")
    if args.out:
        args.out.write_text(
            json.dumps(
                report_json(rows, renderings, stream_tokens_per_s=stream_wps), ensure_ascii=False, indent=1
            ),
            "utf-8",
        )
    return 0


def _stream_delay(args: argparse.Namespace) -> int | None:
    if args.stream_delay_ms is None:
        return None
    if not args.streamed:
        raise ConfigError("--stream-delay-ms sets the timer of --streamed: add --streamed")
    if not 0 <= args.stream_delay_ms <= 10_000:
        raise ConfigError(f"--stream-delay-ms must be 0-10000, got {args.stream_delay_ms}")
    return int(args.stream_delay_ms)


def _stream_pace(args: argparse.Namespace) -> float | None:
    """--streamed's pace in tokens a second, None without --streamed."""
    from streamtts.bench.speech_pipeline import STREAM_TOKENS_PER_S

    if args.stream_wps is not None and not args.streamed:
        raise ConfigError("--stream-wps sets the pace of --streamed: add --streamed")
    if not args.streamed:
        return None
    if args.no_pipeline:
        raise ConfigError("--streamed sends through the Kafka pipeline: drop --no-pipeline")
    wps = STREAM_TOKENS_PER_S if args.stream_wps is None else args.stream_wps
    if not wps >= 1:
        raise ConfigError(f"--stream-wps must be ≥ 1, got {args.stream_wps:g}")
    return float(wps)


def _tiers_path(given: Path) -> Path:
    if str(given) != "-":
        if not given.parent.exists():
            raise ConfigError(f"directory {given.parent} does not exist")
        return given
    from importlib import resources

    from streamtts.schemas.languages import MEASURED_FILE

    return Path(str(resources.files("streamtts.schemas") / MEASURED_FILE))


def _run_timestamps(args: argparse.Namespace, langs: list[str] | None) -> int:
    import sys

    from streamtts.bench.asr import WhisperASR
    from streamtts.bench.timestamp_eval import (
        format_timestamp_table,
        load_timestamp_sentences,
        report_json,
        run_timestamp_eval,
    )
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.processors.synthesize.synthesizer import Synthesizer

    sentences = load_timestamp_sentences(args.set, langs, args.per_lang)
    synth = Synthesizer(VoiceRegistry(threads=args.threads))
    asr = WhisperASR(threads=args.threads)
    report = run_timestamp_eval(sentences, synth, asr, progress=lambda line: print(line, file=sys.stderr))
    print("all words:")
    print(format_timestamp_table(report))
    print("words spoken as written (numbers and symbols read out left out):")
    print(format_timestamp_table(report, written_only=True))
    if args.out:
        args.out.write_text(json.dumps(report_json(report), ensure_ascii=False, indent=1), "utf-8")
    return 0
