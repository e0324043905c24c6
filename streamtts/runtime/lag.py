"""Consumer lag per stage group and partition: end offset − committed offset (admin API)."""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import describe_partitions, make_admin, make_consumer
from streamtts.runtime.lifecycle import cancel_and_wait
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.telemetry import Telemetry

log = logging.getLogger("streamtts.lag")

STOP_BOUND_S = 0.5


class LagMonitor:
    def __init__(
        self,
        kafka: KafkaSettings,
        groups: dict[str, list[str]],
        telemetry: Telemetry,
        interval_s: float = 10.0,
    ) -> None:
        """groups: consumer group → the topics it reads."""
        self.kafka = kafka
        self.groups = groups
        self.telemetry = telemetry
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._clients: tuple[AIOKafkaAdminClient, AIOKafkaConsumer] | None = None
        """Kept between measurements: new ones every 10 s were a connection, API versions and
        a whole-cluster metadata request each, for every process, idle or not."""

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="lag-monitor")

    async def stop(self) -> None:
        # Metrics hold nothing to flush: a measurement caught mid-request is abandoned after a
        # short bound rather than holding the worker's shutdown (one CI run: 30 s in aiokafka).
        if not await cancel_and_wait(self._task, timeout_s=STOP_BOUND_S):
            log_event(log, "lag_measure_abandoned", logging.WARNING, bound_s=STOP_BOUND_S)
        try:  # the same bound for closing its clients (no group to leave: nothing is lost)
            await asyncio.wait_for(self._close(), timeout=STOP_BOUND_S)
        except TimeoutError:
            log_event(log, "lag_close_abandoned", logging.WARNING, bound_s=STOP_BOUND_S)

    async def _loop(self) -> None:
        while True:
            try:
                await self.measure()
            except Exception as err:  # metrics must never take the worker down
                await self._close()  # the next round starts from fresh clients
                log_event(
                    log, "lag_measure_failed", logging.WARNING, error=f"{type(err).__name__}: {err}"[:200]
                )
            await asyncio.sleep(self.interval_s)  # a schedule, not synchronisation

    async def _started(self) -> tuple[AIOKafkaAdminClient, AIOKafkaConsumer]:
        if self._clients is None:
            admin = make_admin(self.kafka)
            consumer = make_consumer(self.kafka, group_id=None)
            self._clients = (admin, consumer)  # before starting: a start that fails is closed too
            await admin.start()
            await consumer.start()
        return self._clients

    async def _close(self) -> None:
        clients, self._clients = self._clients, None
        if clients is not None:
            admin, consumer = clients
            await consumer.stop()
            await admin.close()

    async def measure(self) -> dict[tuple[str, str, int], int]:
        admin, consumer = await self._started()
        out: dict[tuple[str, str, int], int] = {}
        for group, topics in self.groups.items():
            committed = await admin.list_consumer_group_offsets(group)
            partitions = await describe_partitions(admin, topics)
            tps = [TopicPartition(t, p) for t, ps in partitions.items() for p in sorted(ps)]
            ends = await consumer.end_offsets(tps) if tps else {}
            for tp in tps:
                meta = committed.get(tp)
                lag = ends[tp] - (meta.offset if meta and meta.offset >= 0 else 0)
                out[(group, tp.topic, tp.partition)] = lag
                self.telemetry.lag.labels(group, tp.topic, str(tp.partition)).set(lag)
        return out
