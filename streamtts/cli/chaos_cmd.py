"""`streamtts chaos`: steady load through a fault schedule, counted by an independent subscriber
(see bench/chaos.py). It SIGKILLs workers and the local Kafka and stops the local MinIO: run it
against the local stack only (`streamtts infra up`), never a shared cluster. `--brokers 3`
(after `streamtts infra up --brokers 3`) SIGKILLs partition leaders of the three-node cluster."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from streamtts.errors import ConfigError

GUARANTEES = ("at_least_once", "exactly_once")
CLUSTER_SETTLE_TARGET_S = 60.0
"""On three brokers every request settles within this, through a leader's death."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chaos",
        help="fault suite: kill workers, Kafka and MinIO under steady load; count loss and duplicates",
        description=(
            "Starts workers as processes on a fresh topic prefix of the local stack, drives a steady "
            "English load and injects, in turn: SIGKILL of the synthesize worker, SIGKILL of the "
            "segment+encode+sink worker, SIGKILL and restart of Kafka, the segment+encode+sink worker "
            "restarted with Kafka SIGKILLed as it starts its first stage, MinIO stopped, poison records. "
            "An independent read_committed consumer counts sent, completed, lost, duplicated and "
            "flipped results, dead letters and the longest wait after a fault."
        ),
    )
    p.add_argument("--guarantee", choices=(*GUARANTEES, "both"), default="both")
    p.add_argument("--rate", type=float, default=2.5, help="requests per second (default 2.5)")
    p.add_argument("--minio-down", type=float, default=15.0, help="seconds MinIO stays stopped")
    p.add_argument("--gap", type=float, default=10.0, help="steady seconds between faults")
    p.add_argument("--out", type=Path, default=None, help="write the markdown table here too")
    p.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="3: on the three-broker cluster, SIGKILL the leader of tts.requests (restarted), "
        "then the leader of tts.pcm briefly, instead of the one-broker fault schedule",
    )
    p.add_argument("--broker-down", type=float, default=3.0, help="seconds a killed broker stays down")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from streamtts.bench.chaos import CLUSTER_FAULTS, FAULTS, ChaosPlan, ChaosRun, markdown
    from streamtts.infra.local.stack import LocalStack
    from streamtts.runtime.settings import Settings

    if args.rate <= 0 or args.gap < 0 or args.minio_down < 0 or args.broker_down < 0:
        raise ConfigError("--rate must be > 0, --gap, --minio-down and --broker-down ≥ 0")
    settings = Settings.from_env()
    stack = LocalStack.from_settings(settings, brokers=args.brokers)  # refuses anything but loopback
    if any(node.pid() is None for node in stack.brokers) or stack.minio.pid() is None:
        up = "streamtts infra up" + (f" --brokers {args.brokers}" if args.brokers > 1 else "")
        raise ConfigError(f"the local stack is not running: start it with `{up}`")
    faults = CLUSTER_FAULTS if stack.extra_brokers else FAULTS
    reports = []
    for guarantee in GUARANTEES if args.guarantee == "both" else (args.guarantee,):
        plan = ChaosPlan(
            guarantee=guarantee,
            rate=args.rate,
            gap_s=args.gap,
            minio_down_s=args.minio_down,
            kafka_down_s=args.broker_down,
            faults=faults,
        )
        prefix = f"chaos{time.strftime('%Y%m%d%H%M%S')}-{guarantee}-"
        say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        run = ChaosRun(stack, settings.s3, plan, prefix=prefix, say=say)
        reports.append(asyncio.run(run.run()))
        print(markdown(reports[-1:]), file=sys.stderr, flush=True)
    table = markdown(reports)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table + "\n", encoding="utf-8")
    bad = [
        r
        for r in reports
        if r.lost
        or r.flips
        or (r.guarantee == "exactly_once" and r.duplicate_results)
        or (stack.extra_brokers and r.longest_settle_s > CLUSTER_SETTLE_TARGET_S)
    ]
    return 1 if bad else 0
