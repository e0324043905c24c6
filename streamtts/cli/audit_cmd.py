"""`streamtts audit`: read the audit trail (`tts.audit`) from a time to its end."""

from __future__ import annotations

import argparse
from datetime import UTC

from streamtts.cli.arg_types import when

HELP = "read the audit trail (gateway actions, replay runs)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from streamtts.schemas.audit import AUDIT_ACTIONS

    p.add_argument("--since", type=when, default="1h", help="from this time (ISO 8601 or 1h/7d; default 1h)")
    p.add_argument("--until", type=when, help="up to this time (default: the end of the trail now)")
    p.add_argument("--tenant", help="only this tenant's events")
    p.add_argument("--action", action="append", choices=AUDIT_ACTIONS, help="only these actions (repeatable)")
    p.add_argument(
        "--outcome", action="append", help="only these outcomes: ok, unauthorized, denied_address, …"
    )
    p.add_argument("--json", action="store_true", help="one JSON event a line")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import asyncio

    from streamtts.errors import ConfigError

    if args.until is not None and args.since >= args.until:
        raise ConfigError("--since must be before --until")
    return asyncio.run(_read(args))


async def _read(args: argparse.Namespace) -> int:
    import orjson
    from aiokafka.errors import KafkaError

    from streamtts.errors import InfraError
    from streamtts.features.audit.log import read_audit
    from streamtts.runtime.settings import Settings

    kafka = Settings.from_env().kafka
    count = 0
    try:
        async for event in read_audit(
            kafka,
            since=args.since,
            until=args.until,
            tenant=args.tenant,
            actions=frozenset(args.action) if args.action else None,
            outcomes=frozenset(args.outcome) if args.outcome else None,
        ):
            count += 1
            print(orjson.dumps(event.to_dict()).decode() if args.json else line(event), flush=False)
    except (KafkaError, OSError) as err:
        raise InfraError(
            f"cannot read the audit trail from Kafka at {kafka.bootstrap_servers} ({type(err).__name__})"
        ) from None
    if not args.json:
        print(f"{count} events since {args.since.isoformat(timespec='seconds')}")
    return 0


def line(event: object) -> str:
    from streamtts.schemas.audit import AuditEvent

    assert isinstance(event, AuditEvent)
    at = event.at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    parts = [
        at,
        event.action,
        event.outcome,
        f"tenant={event.tenant or '-'}",
        f"key={event.key_id or '-'}",
        f"client={event.client or '-'}",
    ]
    if event.status is not None:
        parts.append(str(event.status))
    if event.request_id:
        parts.append(f"id={event.request_id}")
    if event.bytes:
        parts.append(f"{event.bytes}B")
    parts += [f"{k}={v}" for k, v in event.details.items()]
    return " ".join(parts)
