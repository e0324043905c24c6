"""Whether this process reaches a Kafka broker now: a metadata request every `every_s`, each
bounded by `timeout_s`, from a client of its own. The request names no topic: the brokers
answer with themselves and the controller only. (aiokafka's `describe_cluster` asks for every
topic's metadata and decodes it all: on a cluster of a few hundred topics, every second, in
every process, that was most of an idle worker's CPU and a load on the brokers.)

The clients that carry the work cannot say: an aiokafka consumer whose brokers are gone
returns empty polls, and a producer holds a send for its whole delivery timeout. A process
that knows it reaches no broker can refuse new work at once (503 with Retry-After) and end
what waits on the brokers within a bound, instead of letting callers wait into the void.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaConnectionError
from aiokafka.protocol.metadata import MetadataRequest

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import make_client
from streamtts.runtime.lifecycle import AsyncLifecycle, cancel_and_wait, unless_cancelled_inside
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.startup import describe

log = logging.getLogger("streamtts.broker_watch")


class BrokerWatch(AsyncLifecycle):
    def __init__(self, kafka: KafkaSettings, *, every_s: float = 1.0, timeout_s: float = 2.0) -> None:
        self.kafka = kafka
        self.every_s = every_s
        self.timeout_s = timeout_s
        self.last_ok = time.monotonic()
        """When a probe last reached a broker (start counts: the process started with one)."""
        self.reachable = True
        """The latest probe's answer."""
        self.last_error = ""
        self.answer: tuple[int, int] | None = None
        """What the last answer listed: (brokers, topics); it asks for no topic, so (n, 0)."""
        self.probes = 0
        """Probes made since the start, answered or not."""
        self._probed = asyncio.Condition()
        self._client: AIOKafkaClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._abandoned: set[asyncio.Task[None]] = set()
        """Probes past their timeout and clients being closed: never waited on by the loop."""

    @property
    def down_for(self) -> float:
        """Seconds since a broker last answered, while none does (0.0 while one does)."""
        return 0.0 if self.reachable else time.monotonic() - self.last_ok

    async def lost_for(self, seconds: float) -> None:
        """Return once no broker has answered for `seconds` (a watcher of open work). Checked
        at every probe, so it returns within `every_s` of the bound."""
        async with self._probed:
            await self._probed.wait_for(lambda: not self.reachable and self.down_for >= seconds)

    async def probed(self, count: int) -> None:
        """Return once `count` probes have been made since the start."""
        async with self._probed:
            await self._probed.wait_for(lambda: self.probes >= count)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="broker-watch")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._drop_client()
        if self._abandoned:  # the client's close, bounded; a probe stuck past it is left
            await asyncio.wait(set(self._abandoned), timeout=self.timeout_s)
        for task in self._abandoned:
            task.cancel()

    async def _run(self) -> None:
        while True:
            ok = await self._probe()
            if ok:
                self.last_ok = time.monotonic()
            if ok != self.reachable:
                self.reachable = ok
                if ok:
                    log_event(log, "brokers_reachable", bootstrap=self.kafka.bootstrap_servers)
                else:
                    log_event(
                        log,
                        "brokers_unreachable",
                        logging.WARNING,
                        bootstrap=self.kafka.bootstrap_servers,
                        error=self.last_error,
                    )
            async with self._probed:
                self.probes += 1
                self._probed.notify_all()
            await asyncio.sleep(self.every_s)  # the probe's period

    async def _probe(self) -> bool:
        """One question to the cluster, in a task of its own: a client that swallows the
        cancel of a timed-out call (aiokafka has, for 30 s) is abandoned, never waited on."""
        asking = asyncio.create_task(self._ask(), name="broker-watch-probe")
        await asyncio.wait({asking}, timeout=self.timeout_s)
        if asking.done() and not asking.cancelled() and asking.exception() is None:
            return True
        if asking.done():
            err = asking.exception() if not asking.cancelled() else None
            self.last_error = describe(err) if err is not None else "cancelled"
        else:
            asking.cancel()
            self._abandoned.add(asking)
            asking.add_done_callback(self._abandoned.discard)
            asking.add_done_callback(_retrieved)  # its late error is the outage we reported
            self.last_error = f"no answer within {self.timeout_s:g} s"
        self._drop_client()  # a fresh client bootstraps again on the next probe
        return False

    async def _ask(self) -> None:
        client = self._client  # its own: an abandoned probe never touches a newer client
        if client is None:
            client = self._client = make_client(self.kafka, request_timeout_ms=int(self.timeout_s * 1000))
            await unless_cancelled_inside(client.bootstrap())
        node = client.get_random_node()
        if node is None:
            raise KafkaConnectionError("the cluster's metadata lists no broker")
        answer = await unless_cancelled_inside(client.send(node, MetadataRequest([])))  # no topic
        self.answer = (len(answer.brokers), len(answer.topics))

    def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:  # closed in the background, bounded: the watch goes on meanwhile
            closing = asyncio.create_task(self._close(client), name="broker-watch-close")
            self._abandoned.add(closing)
            closing.add_done_callback(self._abandoned.discard)

    async def _close(self, client: AIOKafkaClient) -> None:
        try:
            async with asyncio.timeout(self.timeout_s):
                await unless_cancelled_inside(client.close())
        except Exception as err:  # gone either way
            log.debug("broker watch: closing its client failed: %s", err)


def _retrieved(task: asyncio.Task[None]) -> None:
    """Mark an abandoned task's outcome as seen (no "exception was never retrieved")."""
    if not task.cancelled():
        task.exception()
