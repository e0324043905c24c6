"""The audit trail writer: every event to the JSON log at once, and to `tts.audit` in the
background, so recording an action never waits on Kafka.

`record()` is synchronous and cannot block: the event goes into a bounded queue that one task
drains into one idempotent producer. A full queue (Kafka slow or down for long) drops the
Kafka copy of the event — the log line is already written — and counts it; delivery
failures are counted too (`streamtts_audit_failed_total{reason}`). `stop()` flushes.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hashlib
import logging
import socket
from collections.abc import AsyncIterator
from datetime import datetime

from aiokafka import AIOKafkaProducer
from prometheus_client import CollectorRegistry, Counter

from streamtts.errors import ConfigError
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import key_partition, make_producer, topic_partitions
from streamtts.runtime.lifecycle import AsyncLifecycle, start_or_release
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.snapshot import snapshot
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import wire
from streamtts.schemas.audit import AuditEvent
from streamtts.schemas.exceptions import ContractError

log = logging.getLogger("streamtts.audit")

HEADERS = [("content-type", b"application/json"), ("schema", b"audit.v1")]


def key_id(key: str) -> str:
    """A stable, non-reversible id of an API key for logs and audit events (a key without a
    configured name): 48 bits of its SHA-256, enough to tell keys apart, useless to guess it."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()[:12]


def operator() -> str:
    """`user@host` of whoever runs a command-line tool (the `client` of a replay run)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"[:256]


class AuditMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.events = Counter(
            "streamtts_audit_events",
            "Audit events recorded (JSON log), by action",
            ["action"],
            registry=registry,
        )
        self.failed = Counter(
            "streamtts_audit_failed",
            "Audit events not written to Kafka: queue_full (Kafka too slow or down), send_failed",
            ["reason"],
            registry=registry,
        )


class AuditLog(AsyncLifecycle):
    """Use as `async with AuditLog(kafka, registry) as audit: audit.record(event)`."""

    def __init__(
        self,
        kafka: KafkaSettings,
        registry: CollectorRegistry,
        *,
        topics: TopicNames | None = None,
        queue_size: int = 10_000,
        flush_timeout_s: float = 10.0,
    ) -> None:
        self.topic = (topics or TopicNames(kafka.topic_prefix)).audit
        self._kafka = kafka
        self.metrics = AuditMetrics(registry)
        self.flush_timeout_s = flush_timeout_s
        self._producer: AIOKafkaProducer | None = None
        self._queue: asyncio.Queue[AuditEvent | None] = asyncio.Queue(maxsize=queue_size)
        self._inflight: set[asyncio.Future[object]] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # Not auto-created (topics are code): without it every event would wait for metadata
        # and be lost at shutdown, so an unrecordable gateway or replay does not start.
        if not await topic_partitions(self._kafka, self.topic):
            raise ConfigError(
                f"audit topic {self.topic!r} does not exist: actions are recorded there "
                "(create it with `streamtts topics apply`)"
            )
        self._producer = make_producer(self._kafka, linger_ms=20)
        await start_or_release(self._producer)
        self._task = asyncio.create_task(self._drain(), name="audit-drain")

    def record(self, event: AuditEvent) -> None:
        """Log the event and queue it for Kafka; never blocks, never raises for Kafka."""
        fields = event.to_dict()
        log_event(log, "audit", **fields)
        self.metrics.events.labels(event.action).inc()
        if self._task is None or self._task.done():
            self.metrics.failed.labels("not_running").inc()
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.metrics.failed.labels("queue_full").inc()

    async def flush(self) -> None:
        """Wait until every event recorded so far is acknowledged by Kafka (or failed)."""
        await self._queue.join()
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)

    async def stop(self) -> None:
        # 1. Let the drain task send what is queued (bounded: a dead broker must not hang exit).
        if self._task is not None and not self._task.done():
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(None)
            try:
                async with asyncio.timeout(self.flush_timeout_s):
                    await self._task
                    # 2. Wait for the broker's acknowledgements of the last batch.
                    if self._inflight:
                        await asyncio.gather(*self._inflight, return_exceptions=True)
            except TimeoutError:
                self._task.cancel()
                lost = self._queue.qsize() + len(self._inflight)
                self.metrics.failed.labels("shutdown").inc(lost)
                log.error("audit: %d events not written to Kafka at shutdown", lost)
        # 3. Close the producer (its own bounded flush of anything still buffered).
        if self._producer is not None:
            await self._producer.stop()

    async def _drain(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                if event is None:
                    return
                key = (event.tenant or "-").encode()
                assert self._producer is not None  # started before the drain task
                try:
                    record = wire.encode(event, source=wire.SOURCE_PREFIX + "/audit")
                    headers = [*record.headers, *HEADERS[1:]]
                    fut = await self._producer.send(self.topic, record.value, key=key, headers=headers)
                except Exception as err:
                    self.metrics.failed.labels("send_failed").inc()
                    log.warning("audit: could not queue event for Kafka: %s", type(err).__name__)
                    continue
                self._inflight.add(fut)
                fut.add_done_callback(self._delivered)
            finally:
                self._queue.task_done()

    def _delivered(self, fut: asyncio.Future[object]) -> None:
        self._inflight.discard(fut)
        if fut.cancelled() or fut.exception() is not None:
            self.metrics.failed.labels("send_failed").inc()
            log.warning(
                "audit: Kafka did not take an event: %r", None if fut.cancelled() else fut.exception()
            )


async def read_audit(
    kafka: KafkaSettings,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    tenant: str | None = None,
    actions: frozenset[str] | None = None,
    outcomes: frozenset[str] | None = None,
) -> AsyncIterator[AuditEvent]:
    """Audit events recorded in [since, until), from the time offset to the end offsets as of
    the start (a bounded read). With `tenant`, only the partition its key maps to is read."""
    topic = TopicNames(kafka.topic_prefix).audit
    partitions = None
    if tenant is not None:
        if every := await topic_partitions(kafka, topic):
            partitions = {key_partition(tenant.encode(), every)}
    async for record in snapshot(kafka, topic, since=since, until=until, partitions=partitions):
        try:
            event = AuditEvent.from_bytes(record.value)
        except ContractError as err:
            log.warning(
                "audit: unreadable event at %s/%d@%d: %s", topic, record.partition, record.offset, err
            )
            continue
        if tenant is not None and event.tenant != tenant:
            continue
        if actions is not None and event.action not in actions:
            continue
        if outcomes is not None and event.outcome not in outcomes:
            continue
        yield event
