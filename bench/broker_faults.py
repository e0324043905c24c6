"""Faults on the local Kafka cluster's brokers: which broker leads a topic, killing one for
good (ports released), and waiting until every replica is back in sync."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Collection

from streamtts.infra.local import processes
from streamtts.infra.local.stack import LocalStack
from streamtts.runtime.kafka import started_admin
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames


async def leader_with_most_partitions(kafka: KafkaSettings, topic: str, exclude: Collection[int] = ()) -> int:
    """The broker (node id) that leads most partitions of `topic`, other than those in `exclude`."""
    async with started_admin(kafka) as admin:
        (described,) = await admin.describe_topics([topic])
    led: dict[int, int] = {}
    for part in described["partitions"]:
        if part["leader"] >= 0 and part["leader"] not in exclude:
            led[part["leader"]] = led.get(part["leader"], 0) + 1
    if not led:
        raise RuntimeError(f"no broker outside {sorted(exclude)} leads a partition of {topic}")
    return max(led, key=lambda node: (led[node], -node))


async def kill_broker(stack: LocalStack, node_id: int) -> None:
    """SIGKILL broker `node_id` of the local cluster and wait until it is gone, ports included
    (a dying process loses its command line before its sockets: "not ours" is not yet "gone")."""
    node = next(n for n in stack.brokers if n.node_id == node_id)
    pid = node.pid()
    assert pid is not None, f"{node.name} is not running"
    os.kill(pid, signal.SIGKILL)
    async with asyncio.timeout(30):
        while processes.is_running(pid) or any(  # noqa: ASYNC110 - a foreign pid has no event
            processes.port_in_use(node.host, port) for port in (node.port, node.controller_port)
        ):
            await asyncio.sleep(0.1)


async def wait_in_sync(kafka: KafkaSettings, topics: TopicNames, timeout_s: float = 60.0) -> None:
    """Until every partition of the run's data topics has all its replicas in sync."""
    names = [topics.requests, topics.segments, topics.pcm, topics.results]
    async with started_admin(kafka) as admin, asyncio.timeout(timeout_s):
        while True:
            described = await admin.describe_topics(names)
            parts = [p for t in described for p in t["partitions"]]
            if parts and all(len(p["isr"]) == len(p["replicas"]) for p in parts):
                return
            await asyncio.sleep(0.2)  # polling the cluster's metadata: no event to await
