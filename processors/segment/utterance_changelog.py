"""Reading the open streamed utterances back from `tts.utterances` when the segment stage is
assigned partitions of `tts.requests` (the state's writer is `streamed.StreamedUtterances`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from streamtts.errors import ConfigError
from streamtts.processors.segment.utterances import Utterance
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import key_partition, topic_partitions
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.snapshot import snapshot

RESTORE_TIMEOUT_S = 30.0
"""Longest a rebalance waits for the open utterances' state to be read back."""


async def held_by(kafka: KafkaSettings, requests_topic: str, held: set[int]) -> Callable[[str], bool]:
    """Whether a request id's records are on a partition of `requests_topic` in `held` (the
    producers' partitioner: murmur2 of the key, as every record of the request used)."""
    every = range(len(await topic_partitions(kafka, requests_topic)) or 1)

    def mine(key: str) -> bool:
        return key_partition(key.encode(), every) in held

    return mine


async def read_back(
    kafka: KafkaSettings, topic: str, mine: Callable[[str], bool], log: logging.Logger
) -> list[Utterance] | None:
    """The last state of every utterance `mine` says is this stage's (ended ones included:
    their ids guard against a redelivered opener); None when the changelog cannot be read
    (missing: `topics apply` not run; or unreachable for `RESTORE_TIMEOUT_S`)."""
    latest: dict[str, bytes | None] = {}
    try:
        async with asyncio.timeout(RESTORE_TIMEOUT_S):  # a rebalance must not wait forever
            async for record in snapshot(kafka, topic):
                key = (record.key or b"").decode(errors="replace")
                if mine(key):
                    latest[key] = record.value
    except (ConfigError, TimeoutError) as err:
        log_event(
            log, "utterances_not_restored", logging.ERROR, error=str(err)[:200] or "timed out", topic=topic
        )
        return None
    out = []
    for key, value in latest.items():
        if value is None:
            continue
        try:
            out.append(Utterance.from_bytes(value))
        except (ValueError, TypeError, KeyError) as err:
            log_event(log, "utterance_unreadable", logging.ERROR, request_id=key, error=str(err)[:200])
    return out
