"""Cancels as every stage sees them: one reader of `tts.control` per worker process.

A cancel must reach every stage of every worker (the one synthesizing the request, the sink
assembling it), so the topic is read whole — no consumer group — from `lookback_s` before
start (a worker restarted mid-request still knows recent cancels) and followed live. Stages
ask `cancelled(tenant, request_id)`: a dict lookup on their hot path. A cancel naming another
tenant than the request's matches nothing, so one tenant can never stop another's work.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from aiokafka import ConsumerRecord, TopicPartition

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topic_follower import TopicFollower
from streamtts.schemas import ContractError, ControlMessage

log = logging.getLogger("streamtts.cancellations")


class CancelWatch(TopicFollower):
    """The cancels of the last `ttl_s` seconds (bounded), kept current from `tts.control`."""

    what = "control"

    def __init__(
        self,
        kafka: KafkaSettings,
        topic: str,
        *,
        lookback_s: float = 900.0,
        ttl_s: float = 3600.0,
        max_entries: int = 100_000,
    ) -> None:
        super().__init__(kafka, topic, poll_ms=500, log=log, name="cancel-watch")
        self.lookback_s = lookback_s
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._cancels: OrderedDict[tuple[str, str], tuple[float, ControlMessage]] = OrderedDict()

    def cancelled(self, tenant: str, request_id: str) -> ControlMessage | None:
        """The cancel of this tenant's request, if one was sent."""
        entry = self._cancels.get((tenant, request_id))
        if entry is None:
            return None
        if time.monotonic() - entry[0] > self.ttl_s:
            self._cancels.pop((tenant, request_id), None)
            return None
        return entry[1]

    def add(self, message: ControlMessage) -> None:
        key = (message.tenant, message.request_id)
        self._cancels[key] = (time.monotonic(), message)
        self._cancels.move_to_end(key)
        while len(self._cancels) > self.max_entries:
            self._cancels.popitem(last=False)

    async def _seek(self, tps: list[TopicPartition], ends: dict[TopicPartition, int]) -> None:
        since = int((time.time() - self.lookback_s) * 1000)
        found = await self._consumer.offsets_for_times({tp: since for tp in tps})
        for tp in tps:
            at = found.get(tp)
            self._consumer.seek(tp, at.offset if at is not None else ends[tp])

    async def _take_batch(self, records: list[ConsumerRecord]) -> None:
        for record in records:
            try:
                message = ControlMessage.from_bytes(record.value)
            except ContractError as err:
                log_event(log, "control_message_invalid", logging.WARNING, error=str(err)[:200])
                continue
            self.add(message)
            log_event(log, "cancel_seen", request_id=message.request_id, tenant=message.tenant)
