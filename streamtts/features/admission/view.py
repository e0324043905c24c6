"""The synthesize workers' load reports as a client sees them, and the admission check.

`LoadView` reads `tts.load` whole (it is compacted: one record per worker) and follows it; a
report older than `STALE_INTERVALS` of its worker's interval is dropped (that worker stopped
or hangs — its partitions move to another, which reports them). `Admission` puts the view,
the partition counts of the segments topics and `policy` together for a client (gateway,
`streamtts submit`).
"""

from __future__ import annotations

import logging
import time

from aiokafka import ConsumerRecord

from streamtts.features.admission.policy import Prediction, Refusal, admit, predict
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import topic_partitions
from streamtts.runtime.lifecycle import AsyncLifecycle
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topic_follower import TopicFollower
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import ContractError, LoadReport, TTSRequest
from streamtts.schemas.request import pool_of

log = logging.getLogger("streamtts.admission")

STALE_INTERVALS = 3.0
"""A report older than this many of its worker's intervals no longer counts."""


class LoadView(TopicFollower):
    """The newest report of every worker that reported recently."""

    what = "load"

    def __init__(self, kafka: KafkaSettings, topic: str) -> None:
        super().__init__(kafka, topic, poll_ms=200, log=log, name="load-view")
        self._reports: dict[str, tuple[float, LoadReport]] = {}

    def fresh(self, now: float | None = None) -> list[LoadReport]:
        """Reports young enough to trust, by the time they were read (this host's clock only)."""
        now = time.monotonic() if now is None else now
        out = []
        for worker, (seen, report) in list(self._reports.items()):
            if now - seen > STALE_INTERVALS * report.interval_s:
                del self._reports[worker]
            else:
                out.append(report)
        return out

    def add(self, report: LoadReport, seen: float | None = None) -> None:
        self._reports[report.worker] = (time.monotonic() if seen is None else seen, report)

    async def _take_batch(self, records: list[ConsumerRecord]) -> None:
        for record in records:
            if record.value is None:  # a tombstone: the worker stopped
                self._reports.pop((record.key or b"").decode(errors="replace"), None)
                continue
            try:
                report = LoadReport.from_bytes(record.value)
            except ContractError as err:
                log_event(log, "load_report_invalid", logging.WARNING, error=str(err)[:200])
                continue
            if self.caught_up.is_set():
                self.add(report)  # live: fresh now, whatever the worker's clock says
            else:
                # Read back from the log, an old report would look fresh: judge it by its own
                # time (the worker's clock; only this catch-up depends on the clocks agreeing).
                age_s = max(0.0, time.time() - report.at.timestamp())
                self.add(report, time.monotonic() - age_s)


class Admission(AsyncLifecycle):
    """Whether a request's deadline admits it, by the workers' latest reports."""

    def __init__(self, kafka: KafkaSettings, long_text_chars: int, topics: TopicNames | None = None) -> None:
        self.topics = topics or TopicNames(kafka.topic_prefix)
        self.view = LoadView(kafka, self.topics.load)
        self.kafka = kafka
        self.long_text_chars = long_text_chars
        self._partitions: dict[str, int] = {}
        self._queued: dict[str, list[tuple[float, float]]] = {}
        """worker → (wall time, predicted first-span compute ms) of each request this client
        let through to it: counted on top of the worker's report until a newer one includes it."""

    async def start(self) -> None:
        for topic in (self.topics.segments, self.topics.segments_long):
            self._partitions[topic] = len(await topic_partitions(self.kafka, topic))
        await self.view.start()

    async def stop(self) -> None:
        await self.view.stop()

    def _unreported_ms(self, report: LoadReport) -> float:
        """First-span compute this client queued on the worker after its report was taken."""
        since = report.at.timestamp()
        kept = [(t, ms) for t, ms in self._queued.get(report.worker, ()) if t > since]
        self._queued[report.worker] = kept
        return sum(ms for _, ms in kept)

    def predict(self, request: TTSRequest, engine: str) -> Prediction | None:
        pool = pool_of(request, self.long_text_chars)
        topic = self.topics.segments if pool == "short" else self.topics.segments_long
        return predict(
            self.view.fresh(),
            request_id=request.request_id,
            topic=topic,
            partitions=self._partitions.get(topic, 0),
            engine=engine,
            chars=len(request.text),
            unreported_ms=self._unreported_ms,
        )

    def check(self, request: TTSRequest, engine: str) -> Refusal | None:
        """A refusal for a request whose deadline its predicted first audio misses; an
        admitted request's compute is counted against its worker until the next report."""
        prediction = self.predict(request, engine)
        refusal = admit(prediction, request.deadline_ms)
        if refusal is None:
            if prediction is not None:
                self._queued.setdefault(prediction.worker, []).append((time.time(), prediction.first_ms))
            return None
        log_event(
            log,
            "request_refused",
            logging.WARNING,
            request_id=request.request_id,
            tenant=request.tenant,
            reason=refusal.reason,
            predicted_ms=refusal.predicted_ms,
            deadline_ms=refusal.deadline_ms,
            worker=refusal.worker,
        )
        return refusal
