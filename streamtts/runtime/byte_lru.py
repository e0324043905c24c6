"""A thread-safe LRU of byte values, bounded by their total size (the caches of rendered and
encoded audio)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ByteLRU(Generic[K]):
    """Least recently used entries go first once the values exceed `max_bytes` in total."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[K, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> bytes | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: bytes) -> int:
        """Store; returns how many entries were evicted to make room (0 if it does not fit)."""
        if len(value) > self.max_bytes:
            return 0
        evicted = 0
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            while self._items and self._bytes + len(value) > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped)
                evicted += 1
            self._items[key] = value
            self._bytes += len(value)
        return evicted
