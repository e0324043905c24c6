"""A synthesize worker of a candidate release tells the release guard about its canary: a
`CanaryReport` on `tts.config` whenever the canary's state changes (and once at start)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from datetime import UTC, datetime

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.lifecycle import AsyncLifecycle
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import CanaryReport, wire

log = logging.getLogger("streamtts.canary")


class CanaryReports(AsyncLifecycle):
    def __init__(self, kafka: KafkaSettings, topic: str, release: str, worker: str | None = None) -> None:
        self.topic = topic
        self.release = release
        self.worker = worker or f"{socket.gethostname()}-{os.getpid()}"
        self._producer = make_producer(kafka)
        self._last: bool | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        await self._producer.start()

    def report(self, ok: bool, reason: str = "") -> None:
        """Called with every canary result (on the event loop); sends only changes."""
        if ok == self._last:
            return
        self._last = ok
        report = CanaryReport(
            release=self.release, worker=self.worker, ok=ok, reason=reason or None, at=datetime.now(UTC)
        )
        task = asyncio.get_running_loop().create_task(self._send(report))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, report: CanaryReport) -> None:
        try:
            record = wire.encode(report, source=wire.SOURCE_PREFIX + "/canary")
            await self._producer.send_and_wait(
                self.topic, record.value, key=report.key, headers=record.headers
            )
        except Exception as err:  # the guard misses one state; the alert rule still sees it
            log_event(log, "canary_report_failed", logging.WARNING, error=str(err)[:200])

    async def stop(self) -> None:
        if self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)
        await self._producer.stop()
