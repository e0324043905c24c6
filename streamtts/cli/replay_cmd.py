"""`streamtts replay dlq|request|window`: recover and re-render from Kafka's own history."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from streamtts.audio import formats
from streamtts.cli.arg_types import when
from streamtts.errors import ConfigError

if TYPE_CHECKING:
    from streamtts.producers.replay.options import ReplayOptions
    from streamtts.producers.replay.summary import ReplaySummary
    from streamtts.runtime.settings import KafkaSettings


HELP = "re-drive dead letters, re-run requests, replay a time window"


def add_arguments(p: argparse.ArgumentParser) -> None:
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)

    from streamtts.runtime.topology import TOPOLOGY

    d = kinds.add_parser("dlq", help="re-drive a stage's dead letters to their original topic")
    d.add_argument("--stage", required=True, choices=[spec.name for spec in TOPOLOGY])
    d.add_argument("--reason", help="only this reason (e.g. storage errors: processing_error)")
    d.add_argument("--exception-class", help="only this exception class")
    d.add_argument("--tenant")
    d.add_argument("--request-id", action="append", dest="request_ids", metavar="ID")
    d.add_argument("--since", type=when, help="failed at or after (ISO 8601 or -2h)")
    d.add_argument("--until", type=when, help="failed before")
    d.add_argument("--max-attempts", type=int, default=5, help="skip records that failed this often")
    _common(d)
    d.set_defaults(func=_dlq)

    r = kinds.add_parser("request", help="re-synthesize requests by id")
    r.add_argument("request_ids", nargs="+", metavar="ID")
    r.add_argument("--voice")
    r.add_argument("--format", choices=formats.names())
    r.add_argument("--same-id", action="store_true", help="keep the id (outputs are overwritten)")
    r.add_argument("--namespace", help="store outputs under NAMESPACE/… instead")
    r.add_argument(
        "--lexicon-version",
        type=int,
        help="say it with this version of the tenant's lexicon (the original result's lexicon_version)",
    )
    _common(r)
    r.set_defaults(func=_request)

    w = kinds.add_parser("window", help="replay every request between two times")
    w.add_argument("--from", dest="since", type=when, required=True)
    w.add_argument("--to", dest="until", type=when, required=True)
    w.add_argument("--namespace", help="store outputs under NAMESPACE/… (compare models safely)")
    _common(w)
    w.set_defaults(func=_window)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="print what would move; change nothing")
    p.add_argument("--rate", type=float, help="at most this many records per second")
    p.add_argument("--force", action="store_true", help="replay again what the ledger says was replayed")


def _options(args: argparse.Namespace) -> ReplayOptions:
    """`_common`'s values, as every replay takes them."""
    from streamtts.producers.replay.options import ReplayOptions

    return ReplayOptions(dry_run=args.dry_run, rate=args.rate, force=args.force)


def _print(summary: ReplaySummary, title: str) -> int:
    for line in summary.planned:
        print(f"would move: {line}")
    print(f"{title}: " + "\n".join(summary.lines()))
    return 1 if summary.failed else 0


T = TypeVar("T")


def _audited(
    action: str,
    run: Callable[[KafkaSettings], Awaitable[T]],
    summary_of: Callable[[T], ReplaySummary],
    *,
    tenant: str | None = None,
    selection: dict[str, str | int],
) -> T:
    """Run a replay on the configured Kafka under the audit log; a Kafka error is one line."""
    import asyncio

    from aiokafka.errors import KafkaError

    from streamtts.errors import InfraError
    from streamtts.producers.replay.audit import audited
    from streamtts.runtime.settings import Settings

    kafka = Settings.from_env().kafka
    try:
        return asyncio.run(
            audited(kafka, action, lambda: run(kafka), summary_of, tenant=tenant, selection=selection)
        )
    except KafkaError as err:
        raise InfraError(f"Kafka error during replay: {type(err).__name__}: {err}") from None


def _dlq(args: argparse.Namespace) -> int:
    from streamtts.producers.replay import DlqFilter, replay_dlq

    if args.since and args.until and args.since >= args.until:
        raise ConfigError("--since must be before --until")
    flt = DlqFilter(
        reason=args.reason,
        error_class=args.exception_class,
        tenant=args.tenant,
        request_ids=frozenset(args.request_ids) if args.request_ids else None,
        since=args.since,
        until=args.until,
    )
    selection: dict[str, str | int] = {"stage": args.stage}
    for name in ("reason", "exception_class", "since", "until"):
        if getattr(args, name) is not None:
            selection[name] = str(getattr(args, name))
    if args.request_ids:
        selection["request_ids"] = ",".join(args.request_ids)
    summary = _audited(
        "replay_dlq",
        lambda kafka: replay_dlq(
            kafka, args.stage, flt, options=_options(args), max_attempts=args.max_attempts
        ),
        lambda s: s,
        tenant=args.tenant,
        selection=selection,
    )
    return _print(summary, f"replay dlq {args.stage}")


def _request(args: argparse.Namespace) -> int:
    from streamtts.producers.replay import replay_requests

    summary, mapping = _audited(
        "replay_request",
        lambda kafka: replay_requests(
            kafka,
            args.request_ids,
            voice=args.voice,
            fmt=args.format,
            new_ids=not args.same_id,
            namespace=args.namespace,
            options=_options(args),
            lexicon_version=args.lexicon_version,
        ),
        lambda r: r[0],
        selection={"request_ids": ",".join(args.request_ids)[:200]},
    )
    for old, new in mapping.items():
        print(f"{old} -> {new}")
    code = _print(summary, "replay request")
    if summary.skipped.get("not_found"):
        print(
            f"streamtts: error: {summary.skipped['not_found']} request id(s) not found on the requests topic",
            file=sys.stderr,
        )
        return 1
    return code


def _window(args: argparse.Namespace) -> int:
    from streamtts.producers.replay import replay_window

    if args.since >= args.until:
        raise ConfigError(f"--from ({args.since.isoformat()}) must be before --to ({args.until.isoformat()})")
    summary = _audited(
        "replay_window",
        lambda kafka: replay_window(
            kafka, args.since, args.until, namespace=args.namespace, options=_options(args)
        ),
        lambda s: s,
        selection={"from": args.since.isoformat(), "to": args.until.isoformat()},
    )
    return _print(summary, "replay window")
