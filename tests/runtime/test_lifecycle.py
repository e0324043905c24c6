"""`cancel_and_wait`: a task that unwinds on cancel is awaited; one that swallows the cancel
(as a client library caught mid-request did in one CI run, for 30 s) holds the caller at most
its bound."""

from __future__ import annotations

import asyncio
import time

import pytest

from streamtts.runtime.lifecycle import cancel_and_wait, start_or_release


async def test_a_task_that_unwinds_is_awaited() -> None:
    unwound = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            unwound.set()

    task = asyncio.create_task(work())
    await asyncio.sleep(0)  # let it start
    assert await cancel_and_wait(task, timeout_s=5.0)
    assert unwound.is_set() and task.cancelled()


async def test_a_task_that_swallows_the_cancel_holds_the_caller_at_most_the_bound() -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # swallows the cancel and keeps going

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    started = time.perf_counter()
    assert not await cancel_and_wait(task, timeout_s=0.2)
    assert time.perf_counter() - started < 2.0
    assert not task.done()
    release.set()
    await task


async def test_none_means_nothing_was_started() -> None:
    assert await cancel_and_wait(None)


class _Client:
    def __init__(self, fails: bool) -> None:
        self.fails = fails
        self.calls: list[str] = []

    async def start(self) -> None:
        self.calls.append("start")
        if self.fails:
            raise ConnectionError("no broker")

    async def stop(self) -> None:
        self.calls.append("stop")


async def test_a_failed_start_releases_the_client_and_raises() -> None:
    client = _Client(fails=True)
    with pytest.raises(ConnectionError):
        await start_or_release(client)
    assert client.calls == ["start", "stop"]


async def test_a_good_start_leaves_the_client_running() -> None:
    client = _Client(fails=False)
    await start_or_release(client)
    assert client.calls == ["start"]
