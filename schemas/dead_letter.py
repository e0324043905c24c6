"""The dead-letter record, in the Kafka Connect / Kafka Streams convention.

A dead letter *is* the record that failed: its key and value are the original bytes,
unchanged, and its original headers are kept. The cause and origin are added as headers
(`streamtts.dlq.*`, in the spirit of Connect's `__connect.errors.*`), so any client (kcat,
Connect, another language) can read, filter and re-drive it without our code.

`DeadLetter` is the parsed view of such a record (`from_record`) and builds one (`headers`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from streamtts.schemas.exceptions import ContractError
from streamtts.schemas.headers import header_pairs
from streamtts.schemas.names import STAGE_NAME

DLQ_PREFIX = "streamtts.dlq."
"""Every dead-letter header starts with this; re-driven records keep only attempts/first failure."""


class DlqHeader:
    """Header names of a dead letter (values are UTF-8 text)."""

    STAGE = DLQ_PREFIX + "stage"
    TOPIC = DLQ_PREFIX + "topic"
    PARTITION = DLQ_PREFIX + "partition"
    OFFSET = DLQ_PREFIX + "offset"
    REASON = DLQ_PREFIX + "reason"
    EXCEPTION_CLASS = DLQ_PREFIX + "exception.class"
    EXCEPTION_MESSAGE = DLQ_PREFIX + "exception.message"
    ATTEMPTS = DLQ_PREFIX + "attempts"
    FIRST_FAILURE_AT = DLQ_PREFIX + "first_failure_at"
    FAILED_AT = DLQ_PREFIX + "failed_at"
    WORKER = DLQ_PREFIX + "worker"
    REQUEST_ID = DLQ_PREFIX + "request_id"
    TENANT = DLQ_PREFIX + "tenant"


MAX_REASON_CHARS = 200
MAX_MESSAGE_CHARS = 500


@dataclass(frozen=True)
class DeadLetter:
    """A record a stage could not process, with why and where from."""

    stage: str
    """Stage that gave up on it (segment, synthesize, encode, sink)."""
    topic: str
    """Where the record was read: re-driving sends it back there."""
    partition: int
    offset: int
    key: bytes | None
    """The original key, unchanged (the request id for pipeline records)."""
    payload: bytes
    """The original value, byte for byte."""
    reason: str
    """Short cause for filtering: "invalid_json", "missing", "unknown_voice", "text_too_long", ..."""
    error_class: str
    error_message: str
    attempts: int
    """Processing attempts so far, across re-drives."""
    first_failure_at: datetime
    failed_at: datetime
    worker_id: str
    request_id: str | None = None
    tenant: str | None = None
    original_headers: tuple[tuple[str, bytes], ...] = field(default=())
    """The record's own headers (without earlier dead-letter headers)."""

    @property
    def key_text(self) -> str | None:
        return self.key.decode("utf-8", errors="replace") if self.key is not None else None

    def headers(self) -> list[tuple[str, bytes]]:
        """The record's original headers followed by the cause/origin headers."""
        out = list(self.original_headers)
        fields = [
            (DlqHeader.STAGE, self.stage),
            (DlqHeader.TOPIC, self.topic),
            (DlqHeader.PARTITION, str(self.partition)),
            (DlqHeader.OFFSET, str(self.offset)),
            (DlqHeader.REASON, self.reason[:MAX_REASON_CHARS]),
            (DlqHeader.EXCEPTION_CLASS, self.error_class),
            (DlqHeader.EXCEPTION_MESSAGE, self.error_message[:MAX_MESSAGE_CHARS]),
            (DlqHeader.ATTEMPTS, str(self.attempts)),
            (DlqHeader.FIRST_FAILURE_AT, self.first_failure_at.isoformat()),
            (DlqHeader.FAILED_AT, self.failed_at.isoformat()),
            (DlqHeader.WORKER, self.worker_id),
            (DlqHeader.REQUEST_ID, self.request_id),
            (DlqHeader.TENANT, self.tenant),
        ]
        out += [(name, value.encode()) for name, value in fields if value is not None]
        return out

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None, headers: object) -> DeadLetter:
        """Parse a dead-letter record; `ContractError` names the first missing/invalid header."""
        pairs = header_pairs(headers)
        found: dict[str, str] = {}
        own: list[tuple[str, bytes]] = []
        for name, raw in pairs:
            if name.startswith(DLQ_PREFIX):
                found[name] = raw.decode("utf-8", errors="replace")
            else:
                own.append((name, raw))

        def need(name: str) -> str:
            if name not in found:
                raise ContractError("dead_letter", name, "missing", "header is required")
            return found[name]

        def number(name: str) -> int:
            try:
                n = int(need(name))
            except ValueError:
                raise ContractError("dead_letter", name, "int_parsing", "not an integer") from None
            if n < 0:
                raise ContractError("dead_letter", name, "greater_than_equal", "must be ≥ 0")
            return n

        def moment(name: str) -> datetime:
            try:
                at = datetime.fromisoformat(need(name))
            except ValueError:
                raise ContractError("dead_letter", name, "datetime_parsing", "not an ISO time") from None
            if at.tzinfo is None:
                raise ContractError("dead_letter", name, "timezone_aware", "needs a time zone")
            return at

        stage = need(DlqHeader.STAGE)
        if not STAGE_NAME.fullmatch(stage):
            raise ContractError(
                "dead_letter", DlqHeader.STAGE, "pattern_mismatch", f"not a stage name: {stage!r}"
            )
        return cls(
            stage=stage,
            topic=need(DlqHeader.TOPIC),
            partition=number(DlqHeader.PARTITION),
            offset=number(DlqHeader.OFFSET),
            key=key,
            payload=value or b"",
            reason=need(DlqHeader.REASON),
            error_class=found.get(DlqHeader.EXCEPTION_CLASS, ""),
            error_message=found.get(DlqHeader.EXCEPTION_MESSAGE, ""),
            attempts=max(1, number(DlqHeader.ATTEMPTS)),
            first_failure_at=moment(DlqHeader.FIRST_FAILURE_AT),
            failed_at=moment(DlqHeader.FAILED_AT),
            worker_id=found.get(DlqHeader.WORKER, ""),
            request_id=found.get(DlqHeader.REQUEST_ID),
            tenant=found.get(DlqHeader.TENANT),
            original_headers=tuple(own),
        )
