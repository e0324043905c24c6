"""One async lifecycle shape for clients: `async with x:` means `await x.start()` … `x.stop()`;
how a start that fails releases the client (`start_or_release`); and how a client's `stop()`
ends a background task it started (`cancel_and_wait`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

T = TypeVar("T")


class Startable(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


async def start_or_release(client: Startable) -> None:
    """`await client.start()`; if that fails, stop the half-open client (an aiokafka client
    keeps its connections and tasks) before the error goes on to the caller."""
    try:
        await client.start()
    except BaseException:
        await client.stop()
        raise


async def cancel_and_wait(task: asyncio.Future[Any] | None, timeout_s: float | None = None) -> bool:
    """Cancel `task` (None: none was started) and wait until it has unwound: its
    CancelledError is how it is meant to end, so it is not raised here. With `timeout_s`,
    wait at most that long (a library that swallows the cancel cannot hold the caller);
    returns whether the task has ended."""
    if task is None:
        return True
    task.cancel()
    if timeout_s is not None:
        await asyncio.wait({task}, timeout=timeout_s)
        if not task.done():
            return False
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return True


class CancelledInside(Exception):
    """A client raised CancelledError while nobody cancelled the task awaiting it."""


async def unless_cancelled_inside(aw: Awaitable[T]) -> T:
    """Await `aw`; a CancelledError it raises while this task is not being cancelled becomes
    `CancelledInside`, an ordinary error. Clients do raise their own tasks' cancellation when
    the broker goes away (aiokafka's fetcher on `consumer.stop()`, a faust app's start): let
    through, it would end a start-up retry loop or a stop sequence as if a signal had."""
    try:
        return await aw
    except asyncio.CancelledError as err:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # this task was cancelled: a real cancel
        raise CancelledInside("cancelled inside the client (its broker connection was lost?)") from err


class AsyncLifecycle:
    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
