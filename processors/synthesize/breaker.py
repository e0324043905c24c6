"""Circuit breaker per (voice, language): stop hammering a class that keeps degrading.

closed → (N consecutive degradations) → open for `open_s` → half-open: one probe request
goes the normal way; success closes, another degradation re-opens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _State:
    consecutive: int = 0
    opened_at: float | None = None
    probing: bool = False


class CircuitBreaker:
    def __init__(
        self, threshold: int = 3, open_s: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threshold = threshold
        self.open_s = open_s
        self._clock = clock
        self._lock = threading.Lock()
        self._states: dict[tuple[str, str], _State] = {}

    def is_closed(self, key: tuple[str, str]) -> bool:
        """True while the class has not tripped; unlike `allow`, claims no half-open probe."""
        with self._lock:
            st = self._states.get(key)
            return st is None or st.opened_at is None

    def allow(self, key: tuple[str, str]) -> bool:
        """True if the normal path may be tried (closed, or the half-open probe)."""
        with self._lock:
            st = self._states.get(key)
            if st is None or st.opened_at is None:
                return True
            if self._clock() - st.opened_at < self.open_s:
                return False
            if st.probing:
                return False  # one probe at a time
            st.probing = True
            return True

    def release(self, key: tuple[str, str]) -> None:
        """The probe `allow` granted ended with no verdict (its run was stopped to give the lane
        to a first span, and runs again): the next caller may probe."""
        with self._lock:
            st = self._states.get(key)
            if st is not None:
                st.probing = False

    def record_success(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._states.pop(key, None)

    def record_degradation(self, key: tuple[str, str]) -> None:
        with self._lock:
            st = self._states.setdefault(key, _State())
            st.consecutive += 1
            st.probing = False
            if st.consecutive >= self.threshold or st.opened_at is not None:
                st.opened_at = self._clock()

    def state(self, key: tuple[str, str]) -> str:
        """ "closed", "open" or "half_open" (for metrics and logs)."""
        with self._lock:
            st = self._states.get(key)
            if st is None or st.opened_at is None:
                return "closed"
            return "open" if self._clock() - st.opened_at < self.open_s else "half_open"

    def states(self) -> dict[tuple[str, str], str]:
        with self._lock:
            keys = list(self._states)
        return {k: self.state(k) for k in keys}
