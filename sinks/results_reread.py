"""Before the first record of a partition the sink gained, its memory of finished requests is
read again from tts.results (see `CompletionSink.remember_recent_results`).

Its previous owner may have finished requests whose chunks lie past its last commit (an
unfinished request holds the commit back), after this process's memory was read: the
start-time seed comes before the join, and a join took 12 s under an isolated leader in a
network-fault run, long enough for the peer to finish (and commit) a request the newcomer then
finished twice. The read starts once the fence is up (the listener's `checkpoint.assign`), so
no result of the old owner can follow it; it reads only what was written since the last read.

Done in the loop, bounded and given up on stop, rather than in the rebalance listener: a read
there waits on a cut broker and holds the consumer with it (it hung the gateway's
broker-partition test).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from streamtts.runtime.jsonlog import log_event
from streamtts.sinks.checkpoint import SinkCheckpoint, TopicPart
from streamtts.sinks.telemetry import SinkTelemetry

log = logging.getLogger("streamtts.sink")

REREAD_TIMEOUT_S = 10.0
"""Bound on one read again of tts.results (normally well under a second)."""
REREAD_PAUSE_S = 1.0
"""Pause before a failed read again is retried."""


class ResultsReread:
    """Which gained partitions wait for the read again, and the read itself (bounded, paused
    after a failure, given up on stop)."""

    def __init__(
        self,
        read: Callable[[], Awaitable[None]],
        checkpoint: SinkCheckpoint,
        signals: SinkTelemetry,
        stopping: asyncio.Event,
    ) -> None:
        self._read = read
        self.checkpoint = checkpoint
        self.signals = signals
        self._stopping = stopping
        self.unread_gains: set[TopicPart] = set()
        """Partitions gained since the finished memory was last read from tts.results: their
        records wait for it to be read again."""
        self._after = 0.0
        """A failed read again is retried from this monotonic time on (the brokers are away)."""
        self._failures = 0

    async def read_again(self) -> bool:
        """Read the finished requests again. False: not read (brokers away); the caller puts
        the records back and the read is retried after a pause."""
        wait = self._after - time.monotonic()
        if wait > 0:  # not a busy loop of fetch and seek while the brokers are away
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=wait)
            return False
        await self.checkpoint.wait_assigned()  # the fence of the partitions just gained is up
        pending = {tp: self.checkpoint.epoch(tp) for tp in self.unread_gains}
        read = asyncio.ensure_future(self._read())
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({read, stop}, timeout=REREAD_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not read.done():
                read.cancel()
                with contextlib.suppress(BaseException):  # its reader closes before we go on
                    await asyncio.wait_for(read, timeout=5.0)
        error = None if not read.done() or read.cancelled() else read.exception()
        if read.done() and not read.cancelled() and error is None:
            # Only partitions still held under the assignment the read began after: one lost
            # and gained again meanwhile was fenced anew, after this read started.
            self.unread_gains -= {tp for tp, epoch in pending.items() if self.checkpoint.epoch(tp) == epoch}
            if self._failures:
                log_event(log, "finished_reread", attempts=self._failures + 1)
            self._failures = 0
            return True
        if not self._stopping.is_set():
            self._failures += 1
            self._after = time.monotonic() + REREAD_PAUSE_S
            self.signals.reread_failed()
            if self._failures in (1, 10, 100) or self._failures % 1000 == 0:
                log_event(
                    log,
                    "finished_reread_failed",
                    logging.WARNING,
                    attempts=self._failures,
                    error=str(error)[:200] if error else f"no answer within {REREAD_TIMEOUT_S:.0f} s",
                    waiting=sorted(f"{t}/{p}" for t, p in pending),
                )
        return False
