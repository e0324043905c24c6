"""Wait for completion results of known request ids on the results topic.

The waiter attaches at the *end* of every results partition before the requests are sent
(call `start()` first), so a fast pipeline cannot complete a request before we listen.
It reads without a consumer group: waiting must not steal partitions from other clients.

A request the segment stage refuses (an unknown reply topic or voice, invalid SSML) gets a
dead letter and never a result, so the waiter also reads the segment stage's dead-letter
topic: a refusal ends the wait for that request at once with a `failed` outcome naming the
reason (what the gateway tells its clients too), instead of a timeout. Later stages' dead
letters are followed by a result from the sink.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from streamtts.errors import StreamTTSError
from streamtts.runtime.kafka import attach_at_end, make_consumer, partitions_of
from streamtts.runtime.lifecycle import AsyncLifecycle, start_or_release
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult, ContractError, RequestContext, TTSRequest, wire
from streamtts.schemas.dead_letter import DeadLetter

REFUSING_STAGE = "segment"
"""The stage whose dead letter of a request means no result will come."""


class ResultTimeout(StreamTTSError):
    def __init__(self, missing: set[str], timeout_s: float) -> None:
        self.missing = missing
        ids = ", ".join(sorted(missing)[:3]) + (" …" if len(missing) > 3 else "")
        super().__init__(f"timed out after {timeout_s:g} s waiting for {len(missing)} result(s): {ids}")


class ResultWaiter(AsyncLifecycle):
    def __init__(self, kafka: KafkaSettings, topics: TopicNames | None = None) -> None:
        self._kafka = kafka
        names = topics or TopicNames(kafka.topic_prefix)
        self._topic = names.results
        self._refusals = names.dlq(REFUSING_STAGE)
        self._consumer = make_consumer(kafka, group_id=None, auto_offset_reset="latest")

    async def start(self) -> None:
        await start_or_release(self._consumer)
        tps = await partitions_of(self._kafka, [self._topic])
        if not tps:
            raise StreamTTSError(
                f"results topic {self._topic!r} does not exist; run `streamtts topics apply`"
            )
        # Without the dead-letter topic (not created yet) a refusal ends in the timeout.
        tps += await partitions_of(self._kafka, [self._refusals])
        await attach_at_end(self._consumer, tps)

    async def stop(self) -> None:
        await self._consumer.stop()

    async def wait(self, request_ids: Iterable[str], timeout_s: float) -> dict[str, CompletionResult]:
        """Results for every id in `request_ids`, or ResultTimeout naming those missing."""
        pending = set(request_ids)
        found: dict[str, CompletionResult] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while pending:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ResultTimeout(pending, timeout_s)
            batch = await self._consumer.getmany(timeout_ms=int(min(remaining, 1.0) * 1000))
            for records in batch.values():
                for record in records:
                    key = record.key.decode(errors="replace") if record.key else None
                    if key not in pending:
                        continue
                    try:
                        if record.topic == self._refusals:
                            result = refused(DeadLetter.from_record(record.key, record.value, record.headers))
                        else:
                            result = CompletionResult.from_bytes(record.value)
                    except ContractError:
                        continue  # a malformed record is not ours to judge here; keep waiting
                    found[result.request_id] = result
                    pending.discard(result.request_id)
        return found


def refused(letter: DeadLetter) -> CompletionResult:
    """The `failed` outcome of a request the segment stage dead-lettered (built here, from the
    request in the dead letter: no result is published for it).

    Raises:
        ContractError: the dead letter does not hold a request.
    """
    request = wire.decode(TTSRequest, letter.payload, letter.original_headers)
    ctx = RequestContext.of(request)
    return CompletionResult(
        request_id=request.request_id,
        tenant=request.tenant,
        status="failed",
        format=ctx.format,
        sample_rate=ctx.sample_rate,
        duration_ms=0.0,
        chunks=0,
        # The segment stage's messages are written for the requester ("reply topic … does
        # not exist"), as the gateway shows them.
        error=f"refused by the {letter.stage} stage ({letter.reason}): {letter.error_message[:300]}",
        created_at=request.created_at,
        completed_at=letter.failed_at,
    )
