"""Every replay run leaves an audit event on `tts.audit`: who ran it, what it selected and
what it moved — also a dry run, and a run that failed half-way."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from prometheus_client import CollectorRegistry

from streamtts.features.audit.log import AuditLog, operator
from streamtts.producers.replay.summary import ReplaySummary
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas.audit import AuditEvent

T = TypeVar("T")


async def audited(
    kafka: KafkaSettings,
    action: str,
    run: Callable[[], Awaitable[T]],
    summary_of: Callable[[T], ReplaySummary],
    *,
    tenant: str | None = None,
    selection: dict[str, str | int] | None = None,
) -> T:
    """Run a replay and record it. The audit log starts first: a run that cannot be recorded
    (no audit topic, no Kafka) does not run."""
    async with AuditLog(kafka, CollectorRegistry()) as audit:
        started = time.monotonic()
        details = dict(selection or {})
        outcome = "error"
        try:
            result = await run()
            summary = summary_of(result)
            details.update(
                read=summary.read,
                redriven=summary.redriven,
                skipped=sum(summary.skipped.values()),
                failed=summary.failed,
                dry_run=int(summary.dry_run),
            )
            outcome = "failed" if summary.failed else "ok"
            return result
        except BaseException as err:
            details["error"] = type(err).__name__
            raise
        finally:
            audit.record(
                AuditEvent.new(
                    source="replay",
                    action=action,
                    outcome=outcome,
                    tenant=tenant,
                    client=operator(),
                    duration_ms=round((time.monotonic() - started) * 1000, 2),
                    details={k: (v if isinstance(v, int) else str(v)[:200]) for k, v in details.items()},
                )
            )
