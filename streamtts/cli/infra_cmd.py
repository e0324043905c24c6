"""`streamtts infra up|down|status`: the local Kafka + MinIO stack."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamtts.infra.local.stack import LocalStack, ServiceStatus


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("infra", help="install/start/stop the local Kafka + MinIO stack")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    up = actions.add_parser("up", help="install what is missing, start, wait until ready")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness")
    up.set_defaults(func=_up)
    actions.add_parser("down", help="stop the processes `up` started").set_defaults(func=_down)
    actions.add_parser("status", help="show endpoints, pids, readiness, RSS").set_defaults(func=_status)


def _stack() -> LocalStack:
    from streamtts.infra.local.stack import LocalStack
    from streamtts.runtime.settings import Settings

    return LocalStack.from_settings(Settings.from_env())


def _print_status(rows: list[ServiceStatus]) -> None:
    for r in rows:
        state = "ready" if r.ready else ("starting" if r.pid else "stopped")
        rss = f"{r.rss_mib:.0f} MiB" if r.rss_mib is not None else "-"
        print(f"{r.name:<6} {state:<8} {r.endpoint:<24} pid={r.pid or '-':<8} rss={rss:<9} {r.version}")


def _up(args: argparse.Namespace) -> int:
    _print_status(_stack().up(timeout_s=args.timeout))
    return 0


def _down(args: argparse.Namespace) -> int:
    _stack().down()
    return 0


def _status(args: argparse.Namespace) -> int:
    rows = _stack().status()
    _print_status(rows)
    return 0 if all(r.ready for r in rows) else 3
