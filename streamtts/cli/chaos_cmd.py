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
from typing import TYPE_CHECKING

from streamtts.errors import ConfigError

if TYPE_CHECKING:
    from streamtts.infra.local.stack import LocalStack
    from streamtts.runtime.settings import Settings

GUARANTEES = ("at_least_once", "exactly_once")
CLUSTER_SETTLE_TARGET_S = 60.0
"""On three brokers every request settles within this, through a leader's death."""


HELP = "fault suite: kill workers, Kafka and MinIO under steady load; count loss and duplicates"
DESCRIPTION = (
    "Starts workers as processes on a fresh topic prefix of the local stack, drives a steady "
    "English load and injects, in turn: SIGKILL of the synthesize worker, SIGKILL of the "
    "segment+encode+sink worker, SIGKILL and restart of Kafka, the segment+encode+sink worker "
    "restarted with Kafka SIGKILLed as it starts its first stage, MinIO stopped, poison records. "
    "An independent read_committed consumer counts sent, completed, lost, duplicated and "
    "flipped results, dead letters and the longest wait after a fault."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
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
    p.add_argument(
        "--startup",
        action="store_true",
        help="instead: SIGKILL Kafka at each start-up step of a whole-pipeline worker in turn "
        "(restarted after --broker-down); each must be ready within 30 s of Kafka's return and serve",
    )
    p.add_argument(
        "--hosts",
        action="store_true",
        help="instead: network faults between hosts of their own (after `streamtts infra up --hosts`): "
        "the nemeses of --nemeses one after another, or a seeded random mix with --seed",
    )
    p.add_argument(
        "--nemeses",
        default="zombie_front,isolate_leader,asymmetric,sink_minio,zombie_synth,lossy_synth",
        help="with --hosts: comma-separated nemeses, in order (see bench/net_nemeses.py)",
    )
    p.add_argument("--fault-s", type=float, default=20.0, help="with --hosts: seconds each nemesis lasts")
    p.add_argument("--seed", type=int, default=None, help="with --hosts: a random schedule from this seed")
    p.add_argument("--duration", type=float, default=600.0, help="with --hosts --seed: seconds of schedule")
    p.add_argument(
        "--session-timeout",
        type=float,
        default=6.0,
        help="with --hosts: the workers' group session in seconds (failover speed against false alarms)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from streamtts.bench.chaos import CLUSTER_FAULTS, FAULTS, ChaosPlan, ChaosRun
    from streamtts.bench.chaos_report import markdown
    from streamtts.infra.local.stack import LocalStack
    from streamtts.runtime.settings import Settings

    if args.rate <= 0 or args.gap < 0 or args.minio_down < 0 or args.broker_down < 0:
        raise ConfigError("--rate must be > 0, --gap, --minio-down and --broker-down ≥ 0")
    settings = Settings.from_env()
    if args.hosts:
        return _run_hosts(settings, args)
    stack = LocalStack.from_settings(settings, brokers=args.brokers)  # refuses anything but loopback
    if any(node.pid() is None for node in stack.brokers) or stack.minio.pid() is None:
        up = "streamtts infra up" + (f" --brokers {args.brokers}" if args.brokers > 1 else "")
        raise ConfigError(f"the local stack is not running: start it with `{up}`")
    if args.startup:
        if stack.extra_brokers:
            raise ConfigError("--startup kills the one local broker: run it without --brokers")
        return _run_startup(stack, settings, args)
    faults = CLUSTER_FAULTS if stack.extra_brokers else FAULTS
    # Worker logs beside the table (--out x.md: x/<guarantee>/), else under results/.
    logs = args.out.with_suffix("") if args.out else Path("results") / time.strftime("chaos-%Y%m%d-%H%M%S")
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
        log_dir = logs / guarantee
        run = ChaosRun(stack, settings.s3, plan, prefix=prefix, say=_say, log_dir=log_dir)
        _say(f"[chaos] {guarantee}: worker logs in {log_dir}")
        reports.append(asyncio.run(run.run()))
        _say(markdown(reports[-1:]))
    table = markdown(reports)
    _publish(table, args.out)
    bad = [
        r
        for r in reports
        if r.lost
        or r.flips
        or (r.guarantee == "exactly_once" and r.duplicate_results)
        or (stack.extra_brokers and r.longest_settle_s > CLUSTER_SETTLE_TARGET_S)
    ]
    return 1 if bad else 0


def _run_startup(stack: LocalStack, settings: Settings, args: argparse.Namespace) -> int:
    """`chaos --startup`: the start-up fault sweep (bench/startup_faults.py), every step."""
    from dataclasses import replace

    from streamtts.bench.startup_faults import StartupFaultSweep, StepOutcome, markdown
    from streamtts.infra.topics import apply_topics, drop_topics
    from streamtts.processors.synthesize.speech_stack import build_renderer
    from streamtts.runtime.pipeline_settings import PipelineSettings
    from streamtts.worker import Worker

    pipeline = PipelineSettings.from_env()
    _say("[startup] loading the model once for every run")
    renderer = build_renderer(pipeline)
    kafka = replace(settings.kafka, topic_prefix=f"startup{time.strftime('%Y%m%d%H%M%S')}-")

    def make_worker() -> Worker:
        stages = ["segment", "synthesize", "encode", "sink"]
        return Worker(stages, replace(settings, kafka=kafka), pipeline, renderer=renderer)

    async def sweep() -> list[StepOutcome]:
        await apply_topics(kafka)
        runs = StartupFaultSweep(stack, kafka, make_worker, down_s=args.broker_down, say=_say)
        steps = await runs.steps()
        _say(f"[startup] {len(steps)} steps: {', '.join(steps)}")
        try:
            return await runs.run(steps)
        finally:
            await drop_topics(kafka)  # a single-use prefix; best effort

    try:
        outcomes = asyncio.run(sweep())
    finally:
        renderer.close()
    _publish(markdown(outcomes), args.out)
    return 0 if all(o.ok for o in outcomes) else 1


def _run_hosts(settings: Settings, args: argparse.Namespace) -> int:
    """`chaos --hosts`: network faults between hosts of their own (bench/net_chaos.py)."""
    from streamtts.bench.net_chaos import NetChaosPlan, NetChaosRun
    from streamtts.bench.net_nemeses import NEEDS_QUORUM, NEMESES, fixed_schedule, random_schedule
    from streamtts.bench.net_report import markdown, plot
    from streamtts.infra.local.stack import LocalStack

    stack = LocalStack.on_hosts(settings)
    if any(node.pid() is None for node in stack.brokers) or stack.minio.pid() is None:
        raise ConfigError("the hosts are not running: start them with `streamtts infra up --hosts`")
    if args.seed is not None:
        steps = random_schedule(args.seed, total_s=args.duration, brokers=len(stack.brokers))
    else:
        names = [n.strip() for n in args.nemeses.split(",") if n.strip()]
        unknown = [n for n in names if n not in NEMESES]
        if unknown or not names:
            given = ", ".join(unknown) or "(none given)"
            raise ConfigError(f"--nemeses: unknown {given}; known: {', '.join(NEMESES)}")
        if len(stack.brokers) < 3 and NEEDS_QUORUM & set(names):
            raise ConfigError(f"{', '.join(sorted(NEEDS_QUORUM & set(names)))} needs three brokers")
        steps = fixed_schedule(names, start_s=8.0, duration_s=args.fault_s, gap_s=args.gap)
    out_dir = args.out.parent if args.out else Path("results") / f"net-chaos-{time.strftime('%Y%m%d-%H%M%S')}"
    sections, ok = [], True
    for guarantee in GUARANTEES if args.guarantee == "both" else (args.guarantee,):
        plan = NetChaosPlan(
            tuple(steps),
            guarantee=guarantee,
            rate=args.rate,
            seed=args.seed,
            session_timeout_s=args.session_timeout,
        )
        prefix = f"net{time.strftime('%Y%m%d%H%M%S')}-{guarantee}-"
        run = NetChaosRun(stack, settings.s3, plan, prefix=prefix, say=_say, log_dir=out_dir / guarantee)
        report = asyncio.run(run.run())
        name = f"net-chaos-{guarantee}.png"
        sections.append(markdown(report, name if plot(report, out_dir / name) else None))
        _say(sections[-1])
        ok = ok and report.ok
    _publish("\n".join(sections), args.out, end="")
    return 0 if ok else 1


def _say(message: str) -> None:
    """Progress of a run: on stderr, so stdout holds only the report."""
    print(message, file=sys.stderr, flush=True)


def _publish(report: str, out: Path | None, *, end: str = "\n") -> None:
    """The report on stdout and, with --out, in that file too (its folder made)."""
    print(report)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report + end, encoding="utf-8")
