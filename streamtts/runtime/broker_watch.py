"""Whether this process reaches a Kafka broker now: a metadata request every `every_s`, each
bounded by `timeout_s`, from a client of its own.

The clients that carry the work cannot say: an aiokafka consumer whose brokers are gone
returns empty polls, and a producer holds a send for its whole delivery timeout. A process
that knows it reaches no broker can refuse new work at once (503 with Retry-After) and end
what waits on the brokers within a bound, instead of letting callers wait into the void.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiokafka.admin import AIOKafkaAdminClient

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import make_admin
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
        self._probed = asyncio.Condition()
        self._admin: AIOKafkaAdminClient | None = None
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

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="broker-watch")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._drop_admin()
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
        self._drop_admin()  # a fresh client bootstraps again on the next probe
        return False

    async def _ask(self) -> None:
        admin = self._admin  # its own: an abandoned probe never touches a newer client
        if admin is None:
            admin = self._admin = make_admin(self.kafka, request_timeout_ms=int(self.timeout_s * 1000))
            await unless_cancelled_inside(admin.start())
        await unless_cancelled_inside(admin.describe_cluster())

    def _drop_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:  # closed in the background, bounded: the watch goes on meanwhile
            closing = asyncio.create_task(self._close(admin), name="broker-watch-close")
            self._abandoned.add(closing)
            closing.add_done_callback(self._abandoned.discard)

    async def _close(self, admin: AIOKafkaAdminClient) -> None:
        try:
            async with asyncio.timeout(self.timeout_s):
                await unless_cancelled_inside(admin.close())
        except Exception as err:  # gone either way
            log.debug("broker watch: closing its admin client failed: %s", err)


def _retrieved(task: asyncio.Task[None]) -> None:
    """Mark an abandoned task's outcome as seen (no "exception was never retrieved")."""
    if not task.cancelled():
        task.exception()
