"""`streamtts infra up|down|status`: the local Kafka + MinIO stack (Kafka: one node, or
`--brokers 3` KRaft voters on loopback, or `--hosts`: every broker, MinIO, each worker and the
gateway on a host of its own; down/status find what up started)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamtts.infra.local.jaeger_server import JaegerNode
    from streamtts.infra.local.stack import LocalStack, ServiceStatus


HELP = "install/start/stop the local Kafka + MinIO stack"


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="install what is missing, start, wait until ready")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness")
    up.add_argument(
        "--tracing",
        action="store_true",
        help="also Jaeger (all-in-one, in memory; built from the Go module proxy the first time): "
        "OTLP/HTTP on 127.0.0.1:4318, its query API on :16686 (`streamtts trace ID`)",
    )
    up.set_defaults(func=_up)
    down = actions.add_parser("down", help="stop the processes `up` started")
    down.set_defaults(func=_down)
    status = actions.add_parser("status", help="show endpoints, pids, readiness, RSS")
    status.set_defaults(func=_status)
    for action in (up, down, status):
        action.add_argument(
            "--brokers",
            type=int,
            default=None,
            help="Kafka nodes: 1, or 3 (a KRaft quorum on ports P..P+2, controllers P+100..P+102); "
            "default: as many as the last `up` started here, else 1",
        )
        action.add_argument(
            "--hosts",
            action="store_true",
            default=None,
            help="each broker, MinIO, the workers and the gateway on a host of its own: a network "
            "namespace on the bridge sttsbr0 (10.77.0.0/24; needs root). Default for down/status: "
            "what the last `up` started",
        )


def _stack(brokers: int | None, hosts: bool | None) -> LocalStack:
    from streamtts.infra.local.paths import LocalPaths
    from streamtts.infra.local.stack import LocalStack, hosts_recorded
    from streamtts.runtime.settings import Settings

    settings = Settings.from_env()
    if hosts or (hosts is None and hosts_recorded(LocalPaths.from_env())):
        return LocalStack.on_hosts(settings, brokers=brokers or 3)
    return LocalStack.from_settings(settings, brokers=brokers)


def _jaeger() -> JaegerNode:
    from streamtts.infra.local.jaeger_server import JaegerNode
    from streamtts.infra.local.paths import LocalPaths

    return JaegerNode(LocalPaths.from_env())


def _print_status(rows: list[ServiceStatus]) -> None:
    for r in rows:
        state = "ready" if r.ready else ("starting" if r.pid else "stopped")
        rss = f"{r.rss_mib:.0f} MiB" if r.rss_mib is not None else "-"
        print(f"{r.name:<8} {state:<8} {r.endpoint:<24} pid={r.pid or '-':<8} rss={rss:<9} {r.version}")


def _print_hosts(stack: LocalStack) -> None:
    from streamtts.infra.local import net_hosts

    present = set(net_hosts.namespaces())
    for host in stack.hosts:
        state = "up" if host.netns in present else "absent"
        print(f"host {host.name:<8} {state:<7} {host.address:<12} netns={host.netns}")


def _up(args: argparse.Namespace) -> int:
    from streamtts.infra.local.paths import LocalPaths
    from streamtts.infra.local.stack import record_hosts

    stack = _stack(args.brokers, args.hosts)
    rows = stack.up(timeout_s=args.timeout)
    if args.tracing:
        from streamtts.infra.local.installer import say_stderr
        from streamtts.infra.local.jaeger_server import jaeger_status

        jaeger = _jaeger()
        jaeger.install(say_stderr)
        jaeger.start(say_stderr)
        jaeger.wait_ready(args.timeout)
        rows.append(jaeger_status(jaeger))
    _print_status(rows)
    if args.tracing:
        print(f"export STREAMTTS_OTLP_ENDPOINT={_jaeger().otlp_endpoint}")
    if stack.hosts:
        record_hosts(LocalPaths.from_env(), True)
        _print_hosts(stack)
        print(f"export STREAMTTS_S3_ENDPOINT={stack.minio.endpoint}")
        print("# run a worker on a host: ip netns exec stts-front streamtts run --stage segment …")
    if stack.extra_brokers or stack.hosts:
        print(f"export STREAMTTS_KAFKA_BOOTSTRAP={stack.bootstrap}")
    return 0


def _down(args: argparse.Namespace) -> int:
    from streamtts.infra.local.paths import LocalPaths
    from streamtts.infra.local.stack import record_hosts

    stack = _stack(args.brokers, args.hosts)
    stack.down()
    if _jaeger().stop():
        print("[infra] stopped jaeger", file=sys.stderr)
    if stack.hosts:
        record_hosts(LocalPaths.from_env(), False)
    return 0


def _status(args: argparse.Namespace) -> int:
    from streamtts.infra.local.jaeger_server import jaeger_status

    stack = _stack(args.brokers, args.hosts)
    rows = stack.status()
    jaeger = _jaeger()
    if jaeger.pid() is not None:  # shown once `up --tracing` started it
        rows.append(jaeger_status(jaeger))
    _print_status(rows)
    if stack.hosts:
        _print_hosts(stack)
    return 0 if all(r.ready for r in rows) else 3
