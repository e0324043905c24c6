"""A synthesize worker's load report on `tts.load`, every `interval_s` while it runs.

The worker hands a `snapshot` (its lanes' predicted first-span wait and cost lines, and the
partitions its synthesize stages own); this only publishes it. At stop a tombstone removes
the worker's report at once, so admission stops counting on a queue that is gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass, field

from aiokafka import AIOKafkaProducer

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.lifecycle import AsyncLifecycle, cancel_and_wait
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import LoadReport, wire

log = logging.getLogger("streamtts.admission")


def worker_name() -> str:
    return f"{socket.gethostname()[:100]}:{os.getpid()}"


@dataclass(eq=False)
class LoadReporter(AsyncLifecycle):
    kafka: InitVar[KafkaSettings]
    topic: str
    snapshot: Callable[[str, float], LoadReport]
    """snapshot(worker, interval_s): the report to publish now (called on the loop)."""
    _: KW_ONLY
    interval_s: float = 1.0
    worker: str = field(default_factory=worker_name)
    sent: int = field(default=0, init=False)
    _producer: AIOKafkaProducer = field(init=False, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    def __post_init__(self, kafka: KafkaSettings) -> None:
        self._producer = make_producer(kafka)

    async def start(self) -> None:
        await self._producer.start()
        self._task = asyncio.create_task(self._run(), name="load-reports")

    async def _run(self) -> None:
        key = self.worker.encode()
        while True:
            try:
                record = wire.encode(
                    self.snapshot(self.worker, self.interval_s), source="/streamtts/synthesize"
                )
                await self._producer.send_and_wait(self.topic, record.value, key=key, headers=record.headers)
                self.sent += 1
            except Exception as err:  # Kafka trouble: the next tick tries again; reports are only hints
                log_event(
                    log, "load_report_failed", logging.WARNING, error=f"{type(err).__name__}: {err}"[:200]
                )
            await asyncio.sleep(self.interval_s)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        try:
            await asyncio.wait_for(
                self._producer.send_and_wait(self.topic, None, key=self.worker.encode()), 5
            )
        except Exception as err:  # stopping anyway; the report goes stale within 3 intervals
            log_event(log, "load_report_failed", logging.WARNING, error=f"{type(err).__name__}: {err}"[:200])
        await self._producer.stop()
