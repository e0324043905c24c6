"""A request's result looked up in `tts.results` history: for a status lookup of a request the
gateway's cache no longer holds (or another replica submitted). Bounded in time both ways:
only the last `lookback_s` of the topic is read, and the search gives up after 15 s."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiokafka import TopicPartition

from streamtts.runtime.kafka import make_consumer, topic_partitions
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import CompletionResult, ContractError

log = logging.getLogger("streamtts.gateway.fanout")


async def find_result(
    kafka: KafkaSettings, topic: str, request_id: str, lookback_s: float
) -> CompletionResult | None:
    """The last result keyed `request_id` in `topic` within `lookback_s`, or None."""
    consumer = make_consumer(kafka, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    found: CompletionResult | None = None
    try:
        tps = [TopicPartition(topic, p) for p in sorted(await topic_partitions(kafka, topic))]
        if not tps:
            return None
        consumer.assign(tps)
        since_ms = int((time.time() - lookback_s) * 1000)
        starts = await consumer.offsets_for_times({tp: since_ms for tp in tps})
        ends = await consumer.end_offsets(tps)
        todo: set[TopicPartition] = set()
        for tp in tps:
            start = starts.get(tp)
            if start is None or start.offset >= ends[tp]:
                continue
            consumer.seek(tp, start.offset)
            todo.add(tp)
        key = request_id.encode()
        async with asyncio.timeout(15.0):
            while todo:
                batch = await consumer.getmany(*todo, timeout_ms=500)
                for tp, records in batch.items():
                    for record in records:
                        if record.key == key:
                            with contextlib.suppress(ContractError):
                                found = CompletionResult.from_bytes(record.value)
                        if record.offset + 1 >= ends[tp]:
                            todo.discard(tp)
                for tp in list(todo):
                    if await consumer.position(tp) >= ends[tp]:
                        todo.discard(tp)
    except TimeoutError:
        log.warning("results history search for %s timed out", request_id)
    finally:
        await consumer.stop()
    return found
