"""`streamtts release status | set CANDIDATE --percent 10 | promote | rollback | guard`: gray
releases of the synthesize stage (see README, "Gray releases")."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamtts.schemas import ReleaseConfig


HELP = "gray releases: route a share of requests to a candidate synthesize release"


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p), required=True)
    status = actions.add_parser("status", help="the routing rule in force")
    status.add_argument("--json", action="store_true", help="print the rule as JSON")
    status.set_defaults(func=_run)
    s = actions.add_parser("set", help="send a share of requests to CANDIDATE (creates its lane topics)")
    s.add_argument("candidate", metavar="CANDIDATE", help="release name (workers run with --release NAME)")
    s.add_argument("--percent", type=float, default=0.0, help="share of requests, sticky per request (0–100)")
    s.add_argument("--tenants", default="", help="comma-separated tenants sent to the candidate entirely")
    s.add_argument("--header", action="store_true", help="honour the x-streamtts-release request header")
    s.add_argument("--min-samples", type=int, help="guard: completed requests per lane before judging (20)")
    s.add_argument("--max-error-increase", type=float, help="guard: failed-rate increase allowed (0.02)")
    s.add_argument("--max-degraded-increase", type=float, help="guard: degraded-rate increase allowed (0.05)")
    s.add_argument(
        "--max-first-audio-ratio", type=float, help="guard: P99 first audio × stable allowed (1.5)"
    )
    s.add_argument("--first-audio-slack-ms", type=float, help="guard: plus this many ms (200)")
    s.set_defaults(func=_run)
    promote = actions.add_parser("promote", help="make the candidate the stable release (all new requests)")
    promote.set_defaults(func=_run)
    rollback = actions.add_parser(
        "rollback", help="send no new request to the candidate; re-drive what its dead lane strands to stable"
    )
    rollback.add_argument("--reason", default="manual rollback", help="recorded with the rule")
    rollback.set_defaults(func=_run)
    guard = actions.add_parser("guard", help="run the automatic rollback on its own (until SIGTERM)")
    guard.add_argument("--ops-port", type=int, default=0, help="port of /metrics and /healthz (0: any)")
    guard.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from aiokafka.errors import KafkaError

    from streamtts.errors import InfraError
    from streamtts.runtime.settings import Settings

    settings = Settings.from_env()
    try:
        return asyncio.run(_ACTIONS[args.action](args, settings))
    except (KafkaError, TimeoutError) as err:
        raise InfraError(
            f"cannot reach Kafka at {settings.kafka.bootstrap_servers} ({type(err).__name__})"
        ) from None


async def _status(args: argparse.Namespace, settings: Any) -> int:
    import orjson

    from streamtts.features.releases.watch import read_release
    from streamtts.runtime.topics import TopicNames

    topics = TopicNames(settings.kafka.topic_prefix)
    rule, written = await read_release(settings.kafka, topics.config)
    if args.json:
        print(orjson.dumps(rule.to_dict(), option=orjson.OPT_INDENT_2).decode())
        return 0
    if not written:
        print("no release rule: every request goes to the stable release (tts.segments)")
        return 0
    print(f"version {rule.version}: {rule.state}, stable {rule.stable}, candidate {rule.candidate or '-'}")
    if rule.routing:
        tenants = ",".join(rule.tenants) or "-"
        header = "on" if rule.header else "off"
        print(f"  routing: {rule.percent:g} % sticky, tenants {tenants}, header {header}")
        for release in (rule.stable, rule.candidate or ""):
            short, long = topics.release_segments(release), topics.release_segments(release, "long")
            print(f"  lane {release}: {short}, {long}")
    lim = rule.limits
    print(
        f"  guard: min {lim.min_samples} samples, failed +{lim.max_error_rate_increase:.1%}, "
        f"degraded +{lim.max_degraded_rate_increase:.1%}, P99 first audio ×{lim.max_first_audio_p99_ratio:g}"
        f" +{lim.first_audio_slack_ms:.0f} ms, window {lim.window}"
    )
    print(f"  {rule.reason or ''} ({rule.updated_by}, {rule.updated_at:%Y-%m-%d %H:%M:%S} UTC)")
    return 0


async def _set(args: argparse.Namespace, settings: Any) -> int:
    from streamtts.errors import ConfigError
    from streamtts.features.releases.lanes import create_release_lanes
    from streamtts.features.releases.store import with_canary, write_release
    from streamtts.features.releases.watch import read_release
    from streamtts.runtime.topics import TopicNames
    from streamtts.schemas import ContractError, GuardLimits

    if not 0 <= args.percent <= 100:
        raise ConfigError(f"--percent must be 0–100, got {args.percent:g}")
    tenants = [t.strip() for t in args.tenants.split(",") if t.strip()]
    if not args.percent and not tenants and not args.header:
        raise ConfigError("give --percent, --tenants or --header: otherwise no request reaches the candidate")
    topics = TopicNames(settings.kafka.topic_prefix)
    current, _ = await read_release(settings.kafka, topics.config)
    overrides = {
        "min_samples": args.min_samples,
        "max_error_rate_increase": args.max_error_increase,
        "max_degraded_rate_increase": args.max_degraded_increase,
        "max_first_audio_p99_ratio": args.max_first_audio_ratio,
        "first_audio_slack_ms": args.first_audio_slack_ms,
    }
    try:
        limits = GuardLimits.model_validate(
            current.limits.model_dump() | {k: v for k, v in overrides.items() if v is not None}
        )
        rule = with_canary(
            current, args.candidate, percent=args.percent, tenants=tenants, header=args.header, limits=limits
        )
    except (ContractError, ValueError) as err:
        raise ConfigError(_one_line(err)) from None
    lanes = await create_release_lanes(settings.kafka, args.candidate)
    await write_release(settings.kafka, topics.config, rule)
    print(f"version {rule.version}: {rule.candidate} gets {rule.percent:g} % (lanes {', '.join(lanes)})")
    return 0


async def _next_rule(
    settings: Any, change: Callable[[ReleaseConfig], ReleaseConfig]
) -> tuple[ReleaseConfig, ReleaseConfig]:
    """Read the rule in force and write `change(rule)` as the next one: (in force, written)."""
    from streamtts.features.releases.store import write_release
    from streamtts.features.releases.watch import read_release
    from streamtts.runtime.topics import TopicNames

    topics = TopicNames(settings.kafka.topic_prefix)
    current, _ = await read_release(settings.kafka, topics.config)
    rule = change(current)
    await write_release(settings.kafka, topics.config, rule)
    return current, rule


async def _promote(args: argparse.Namespace, settings: Any) -> int:
    from streamtts.features.releases.store import promoted

    current, rule = await _next_rule(settings, promoted)
    print(f"version {rule.version}: {rule.stable} is stable; {current.stable}'s lane drains what it holds")
    return 0


async def _rollback(args: argparse.Namespace, settings: Any) -> int:
    from streamtts.features.releases.redrive import redrive_lane
    from streamtts.features.releases.store import rolled_back
    from streamtts.runtime.topics import TopicNames

    current, rule = await _next_rule(settings, lambda current: rolled_back(current, reason=args.reason))
    assert current.candidate is not None  # rolled_back() refuses a rule without one
    # A lane with no live worker would strand what it holds: re-drive it to stable now (a
    # guard keeps doing so if a crashed worker's session only times out later).
    topics = TopicNames(settings.kafka.topic_prefix)
    done = await redrive_lane(settings.kafka, current.candidate, rule.stable, topics=topics)
    print(
        f"version {rule.version}: {current.candidate} rolled back; new requests go to {rule.stable}, "
        "requests already routed to it finish on its lane while its workers run; "
        f"{len(done.requests)} unfinished request(s) of a lane without workers re-driven to {rule.stable}"
    )
    return 0


async def _guard(args: argparse.Namespace, settings: Any) -> int:
    import logging
    import signal

    from streamtts.features.releases.auto_rollback import AutoRollback
    from streamtts.runtime import jsonlog
    from streamtts.runtime.ops_server import OpsServer
    from streamtts.runtime.readiness import Readiness
    from streamtts.runtime.telemetry import Telemetry

    jsonlog.configure("INFO", quiet_clients=True)
    telemetry = Telemetry()
    readiness = Readiness(stages_started=True)
    ops = OpsServer(readiness, telemetry, port=args.ops_port, metrics_token=settings.metrics_token)
    port = await ops.start()
    guard = AutoRollback(settings.kafka, telemetry)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await guard.start()
    jsonlog.log_event(logging.getLogger("streamtts.release_guard"), "ops_listening", port=port)
    try:
        await stop.wait()
    finally:
        await guard.stop()
        await ops.stop()
    return 0


def _one_line(err: Exception) -> str:
    """A validation problem as one line naming the field."""
    from pydantic import ValidationError

    if isinstance(err, ValidationError):
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "release"
        return f"{where}: {first.get('msg', 'invalid value')}"
    return str(err).splitlines()[0] if str(err) else type(err).__name__


_ACTIONS = {"status": _status, "set": _set, "promote": _promote, "rollback": _rollback, "guard": _guard}
