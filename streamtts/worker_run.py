"""A worker process's life: start, supervise its stages until SIGTERM/SIGINT or a dead stage
loop, stop within the configured bound."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from streamtts.errors import StreamTTSError
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.lifecycle import cancel_and_wait
from streamtts.worker import Worker

log = logging.getLogger("streamtts.worker")

SUPERVISE_INTERVAL_S = 0.5


class StageFailed(StreamTTSError):
    """A stage's consuming loop died: the process must exit non-zero so it is restarted."""


def _pending_tasks(limit: int = 40) -> list[str]:
    """What the loop still runs when a stop overran its bound: each task's name and the line
    its coroutine waits at, so the log names what held the shutdown."""
    out = []
    for task in asyncio.all_tasks():
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        where = f"{frame.f_code.co_filename.rsplit('/', 3)[-1]}:{frame.f_lineno}" if frame else "?"
        out.append(f"{task.get_name()} {getattr(coro, '__qualname__', coro)!s} @ {where}")
    return sorted(out)[:limit]


async def run_until_signalled(worker: Worker) -> None:
    """Run until SIGTERM/SIGINT, then stop within the configured bound. A stage whose loop
    dies ends the run too (readiness is red meanwhile): `StageFailed` after the stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # A signal during start-up (retrying while the brokers are away) ends it at once: the
    # start unwinds what it started.
    starting = asyncio.create_task(worker.start(), name="worker-start")
    signalled = asyncio.create_task(stop.wait(), name="worker-signalled")
    await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
    signalled.cancel()
    if not starting.done():
        log_event(log, "shutdown_requested", step=worker._step_now, during="start-up")
        await cancel_and_wait(starting)
        return
    starting.result()  # StartupFailed: one line from the CLI, exit non-zero
    failed: dict[str, str] = {}
    try:
        # Supervision: the stages report a dead loop through failure(); poll it between
        # waits for the signal (cheap: a few attribute reads).
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=SUPERVISE_INTERVAL_S)
            failed = worker.failures()
            if failed:
                log_event(log, "stage_failed", logging.ERROR, failures=failed)
                break
    finally:
        log_event(log, "shutdown_requested", timeout_s=worker.pipeline.operations.shutdown_timeout_s)
        try:
            # Stopping = stop fetching, finish or hand back the record in hand (uncommitted
            # records go to the next owner), flush producers, commit. Bounded: a stuck
            # inference must not keep a pod alive forever; what it held is redelivered.
            await asyncio.wait_for(worker.stop(), timeout=worker.pipeline.operations.shutdown_timeout_s)
        except TimeoutError:
            log_event(
                log,
                "shutdown_timeout",
                logging.ERROR,
                timeout_s=worker.pipeline.operations.shutdown_timeout_s,
                pending=_pending_tasks(),
            )
    if failed:
        raise StageFailed("; ".join(f"{k}: {v}" for k, v in failed.items()))
