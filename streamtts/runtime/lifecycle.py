"""One async lifecycle shape for clients: `async with x:` means `await x.start()` … `x.stop()`."""

from __future__ import annotations

from types import TracebackType
from typing import Self


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
