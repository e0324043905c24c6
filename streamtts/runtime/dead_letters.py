"""The one dead-letter path of every stage (faust stages and the sink alike).

1. `dead_letter_record` (pure) turns the failed record + the error into a `DeadLetter`: the
   original key/value/headers unchanged, cause and origin as `streamtts.dlq.*` headers.
2. `DeadLetterPublisher.publish` sends it with the stage's own producer (inside its
   transaction in exactly-once mode) and waits for the broker's ack;
3. then logs one `dead_lettered` event and counts it — only after the ack, so a log line
   never claims a dead letter that was not written.
The caller moves past (commits) the source record only after `publish` returns.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from streamtts.errors import failure_reason
from streamtts.runtime.jsonlog import log_event, record_position
from streamtts.runtime.telemetry import Telemetry
from streamtts.schemas.dead_letter import DLQ_PREFIX, MAX_MESSAGE_CHARS, DeadLetter, DlqHeader

SendRecord = Callable[[str, bytes | None, bytes, list[tuple[str, bytes]]], Awaitable[None]]
"""(topic, key, value, headers) → returns once the broker acknowledged the record."""


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

    def _dlq_header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k == name:
                return v.decode("utf-8", errors="replace")
        return None

    def attempts_so_far(self) -> int:
        """Attempts recorded by an earlier dead-lettering (re-driven records carry it)."""
        try:
            return max(0, int(self._dlq_header(DlqHeader.ATTEMPTS) or 0))
        except ValueError:
            return 0

    def first_failure_at(self) -> datetime | None:
        try:
            raw = self._dlq_header(DlqHeader.FIRST_FAILURE_AT)
            return datetime.fromisoformat(raw) if raw else None
        except ValueError:
            return None

    def own_headers(self) -> tuple[tuple[str, bytes], ...]:
        """The record's headers without dead-letter bookkeeping of an earlier failure."""
        return tuple((k, v) for k, v in self.headers if not k.startswith(DLQ_PREFIX))


def dead_letter_record(
    *,
    stage: str,
    source: SourceRecord,
    error: BaseException,
    request_id: str | None = None,
    tenant: str | None = None,
    attempts: int = 1,
    worker: str | None = None,
) -> DeadLetter:
    """The dead letter for `source`. Attempts add to those of earlier failures."""
    now = datetime.now(UTC)
    key = source.key.decode("utf-8", errors="replace") if source.key else None
    return DeadLetter(
        stage=stage,
        topic=source.topic,
        partition=source.partition,
        offset=source.offset,
        key=source.key,
        payload=source.value or b"",
        reason=failure_reason(error),
        error_class=type(error).__name__,
        error_message=str(error)[:MAX_MESSAGE_CHARS],
        attempts=source.attempts_so_far() + attempts,
        first_failure_at=source.first_failure_at() or now,
        failed_at=now,
        worker_id=worker or worker_id(),
        request_id=request_id or key,
        tenant=tenant,
        original_headers=source.own_headers(),
    )


class DeadLetterPublisher:
    """Writes one stage's dead letters: same record shape, log event and metric for all stages."""

    def __init__(self, stage: str, topic: str, send: SendRecord, telemetry: Telemetry) -> None:
        self.stage = stage
        self.topic = topic
        self._send = send
        self._telemetry = telemetry
        self._log = logging.getLogger(f"streamtts.{stage}")

    async def publish(
        self,
        source: SourceRecord,
        error: BaseException,
        *,
        request_id: str | None = None,
        tenant: str | None = None,
        attempts: int = 1,
    ) -> DeadLetter:
        letter = dead_letter_record(
            stage=self.stage,
            source=source,
            error=error,
            request_id=request_id,
            tenant=tenant,
            attempts=attempts,
        )
        await self._send(self.topic, letter.key, letter.payload, letter.headers())
        log_event(
            self._log,
            "dead_lettered",
            logging.WARNING,
            stage=self.stage,
            request_id=letter.request_id,
            tenant=tenant,
            reason=letter.reason,
            error=letter.error_message[:300],
            attempts=letter.attempts,
            **record_position(source),
        )
        self._telemetry.dead_letters.labels(self.stage, letter.reason).inc()
        return letter
