"""BrokerWatch without a broker: a refused port and a black hole (accepts, never answers) are
both "unreachable" within one probe's timeout, and `lost_for` returns once the bound passed."""

from __future__ import annotations

import asyncio
import time

import pytest

from streamtts.runtime.broker_watch import BrokerWatch
from streamtts.runtime.settings import KafkaSettings


async def _watch(bootstrap: str) -> None:
    watch = BrokerWatch(KafkaSettings(bootstrap_servers=bootstrap), every_s=0.2, timeout_s=0.5)
    started = time.monotonic()
    await watch.start()
    try:
        await asyncio.wait_for(watch.lost_for(1.0), timeout=5)
        assert not watch.reachable and watch.down_for >= 1.0
        assert 1.0 <= time.monotonic() - started < 1.0 + 0.5 + 0.2 + 1.0
        assert watch.last_error
    finally:
        await watch.stop()


async def test_a_refused_broker_is_lost_after_the_bound() -> None:
    await _watch("127.0.0.1:1")


async def test_a_broker_that_never_answers_is_lost_after_the_bound() -> None:
    held: list[asyncio.StreamWriter] = []

    async def swallow(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    try:
        await _watch(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
    finally:
        for w in held:
            w.close()
        server.close()


@pytest.mark.integration
async def test_a_probe_of_a_real_broker_asks_for_no_topic(kafka_settings: KafkaSettings) -> None:
    """The probe runs every second in every worker and gateway: it asks for the brokers only.
    (`describe_cluster` asked for every topic's metadata and decoded it all: on a broker with
    ~470 topics an idle worker spent 37-41 ms of CPU a second on it, 15-18 without.)"""
    watch = BrokerWatch(kafka_settings, every_s=0.1)
    await watch.start()
    try:
        await asyncio.wait_for(watch.probed(2), timeout=30)
        assert watch.reachable and not watch.last_error
        # This test's own topics (infra/topics.yaml's, under its prefix) are on the broker.
        assert watch.answer == (1, 0), "one broker answered, and it listed no topic"
    finally:
        await watch.stop()
