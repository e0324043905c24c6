"""`streamtts demo`: the README's first command — the whole job on the local default."""

from __future__ import annotations

import argparse

HELP = "local Kafka + MinIO, topics, sample requests end to end"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="out/demo", help="folder for the audio files (default out/demo)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for all results")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from streamtts.demo import run_demo

    return run_demo(out_dir=args.out, timeout_s=args.timeout)
