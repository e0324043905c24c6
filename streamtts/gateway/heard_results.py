"""The result on `tts.results` says what the listener heard, not only what the pipeline made.

After a barge-in the gateway knows what it wrote to the client (`RequestState.heard_ms`). The
sink's result says that too when the cancel reached the pipeline before the request was
finished (the cancel carries the heard position as `played_ms`). When the pipeline had
already finished the request (a sentence waiting in the session's queue, paced out at real
time), the sink's result says `completed`, whole: the gateway then publishes the result once
more, `cancelled`, with `spoken_ms` and `words_spoken` of the heard audio
(`sinks.result_builder.as_heard`). A reader of `tts.results` takes the last result of a key.
"""

from __future__ import annotations

import asyncio
import logging

from streamtts.gateway.request_state import RequestState
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.lifecycle import start_or_release
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import wire
from streamtts.sinks.result_builder import as_heard

log = logging.getLogger("streamtts.gateway.heard_results")


class HeardResults:
    """Corrects the results of requests whose audio a cancel cut short; owns its producer."""

    def __init__(self, kafka: KafkaSettings, *, wait_s: float) -> None:
        self.topic = TopicNames(kafka.topic_prefix).results
        self.wait_s = wait_s
        self._producer = make_producer(kafka)
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        await start_or_release(self._producer)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._producer.stop()

    def follow(self, state: RequestState) -> None:
        """Once the request's result arrives, publish it corrected if it says more than heard."""
        task = asyncio.create_task(self._correct(state), name=f"heard-{state.request_id[:40]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _correct(self, state: RequestState) -> None:
        try:
            result = await state.wait_result(self.wait_s)
        except TimeoutError:
            log.warning("no result for %s within %.0f s: not corrected", state.request_id, self.wait_s)
            return
        if state.heard_ms is None:
            return
        corrected = as_heard(result, state.heard_ms)
        if corrected is None:
            return
        state.result = corrected  # this gateway's status answers say the same at once
        state.status = "cancelled"
        record = wire.encode(corrected, source=wire.SOURCE_PREFIX + "/gateway")
        await self._producer.send_and_wait(
            self.topic, record.value, key=corrected.request_id.encode(), headers=record.headers or None
        )
