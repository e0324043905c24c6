"""Dead letters: what a stage could not process, with why and where from.

`dead_letter_record` is pure: it builds the record value (the DeadLetter contract, original
bytes inside) and Kafka-Connect-style headers. Stages send it with their own producer and
commit the source offset only after the DLQ write is acknowledged.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime

from streamtts.errors import failure_reason
from streamtts.schemas import DeadLetter

HEADER_PREFIX = "streamtts.dlq."


def worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class SourceRecord:
    """The record that failed, as read from Kafka."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()

    def attempts_so_far(self) -> int:
        """Attempts recorded by an earlier dead-lettering (replayed records carry it)."""
        for k, v in self.headers:
            if k == HEADER_PREFIX + "attempts":
                try:
                    return int(v)
                except ValueError:
                    return 0
        return 0

    def first_failure_at(self) -> datetime | None:
        for k, v in self.headers:
            if k == HEADER_PREFIX + "first_failure_at":
                try:
                    return datetime.fromisoformat(v.decode())
                except ValueError:
                    return None
        return None


def dead_letter_record(
    *,
    stage: str,
    source: SourceRecord,
    error: BaseException,
    request_id: str | None = None,
    tenant: str | None = None,
    attempts: int = 1,
    worker: str | None = None,
) -> tuple[bytes, list[tuple[str, bytes]]]:
    """Value and headers of the dead letter for `source`. Attempts add to earlier ones."""
    now = datetime.now(UTC)
    total_attempts = source.attempts_so_far() + attempts
    first = source.first_failure_at() or now
    key = source.key.decode("utf-8", errors="replace") if source.key else None
    letter = DeadLetter(
        stage=stage,  # type: ignore[arg-type]
        topic=source.topic,
        partition=source.partition,
        offset=source.offset,
        key=key,
        request_id=request_id or key,
        tenant=tenant,
        reason=failure_reason(error)[:200],
        error_class=type(error).__name__,
        error_message=str(error)[:2000],
        attempts=total_attempts,
        first_failure_at=first,
        failed_at=now,
        worker_id=worker or worker_id(),
        payload=source.value or b"",
    )
    headers = [
        (HEADER_PREFIX + "stage", stage.encode()),
        (HEADER_PREFIX + "topic", source.topic.encode()),
        (HEADER_PREFIX + "partition", str(source.partition).encode()),
        (HEADER_PREFIX + "offset", str(source.offset).encode()),
        (HEADER_PREFIX + "reason", letter.reason.encode()),
        (HEADER_PREFIX + "exception.class", letter.error_class.encode()),
        (HEADER_PREFIX + "exception.message", letter.error_message[:500].encode()),
        (HEADER_PREFIX + "attempts", str(total_attempts).encode()),
        (HEADER_PREFIX + "first_failure_at", first.isoformat().encode()),
        (HEADER_PREFIX + "worker", letter.worker_id.encode()),
    ]
    if tenant:
        headers.append((HEADER_PREFIX + "tenant", tenant.encode()))
    return letter.to_bytes(), headers
