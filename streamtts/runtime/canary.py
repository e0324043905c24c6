"""Canary: synthesize a fixed sentence now and then and compare it with the warm-up result.

The worker renders it as a request through the stages' own handlers in memory (the path real
requests take: plan, render, chunk). The engine is deterministic for a given session and
thread count, so the same sentence must give the same bytes and duration; anything else (a
corrupted session, a broken phonemizer, a model swapped underneath) flips readiness and is
logged with the reason.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

import numpy as np

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.lifecycle import cancel_and_wait

log = logging.getLogger("streamtts.canary")
CANARY_TEXT = "The quick brown fox jumps over the lazy dog."


@dataclass(frozen=True)
class CanaryResult:
    ok: bool
    duration_s: float
    digest: str
    reason: str = ""


class Canary:
    def __init__(
        self,
        synthesize: Callable[[str], Awaitable[np.ndarray]],
        sample_rate: int,
        *,
        interval_s: float,
        on_result: Callable[[CanaryResult], None],
    ) -> None:
        """Args:
        synthesize: text → float32 samples at `sample_rate`, by the path real requests take
            (the worker's own model and voice; CPU-bound work off the event loop).
        interval_s: seconds between runs (0 disables the periodic runs).
        """
        self._synth = synthesize
        self._rate = sample_rate
        self.interval_s = interval_s
        self._on_result = on_result
        self.reference: CanaryResult | None = None
        self._task: asyncio.Task[None] | None = None

    async def _measure(self) -> CanaryResult:
        samples = await self._synth(CANARY_TEXT)
        pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
        return CanaryResult(True, len(samples) / self._rate, hashlib.sha256(pcm).hexdigest()[:16])

    async def establish(self) -> CanaryResult:
        """The reference run (at warm-up)."""
        self.reference = await self._measure()
        return self.reference

    async def run_once(self) -> CanaryResult:
        try:
            got = await self._measure()
        except Exception as err:  # any failure of the engine is a failed canary
            result = CanaryResult(False, 0.0, "", f"synthesis failed: {type(err).__name__}: {str(err)[:120]}")
        else:
            ref = self.reference
            if ref is None:
                self.reference = got
                result = got
            elif got.digest != ref.digest or abs(got.duration_s - ref.duration_s) > 0.01:
                result = CanaryResult(
                    False,
                    got.duration_s,
                    got.digest,
                    f"output changed: {got.duration_s:.3f} s/{got.digest} "
                    f"vs warm-up {ref.duration_s:.3f} s/{ref.digest}",
                )
            else:
                result = got
        level = logging.INFO if result.ok else logging.ERROR
        log_event(
            log,
            "canary" if result.ok else "canary_failed",
            level,
            ok=result.ok,
            audio_s=round(result.duration_s, 3),
            digest=result.digest,
            reason=result.reason or None,
        )
        self._on_result(result)
        return result

    async def start(self) -> None:
        if self.interval_s > 0:
            self._task = asyncio.create_task(self._loop(), name="canary")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)  # a schedule, not synchronisation
            await self.run_once()

    async def stop(self) -> None:
        await cancel_and_wait(self._task)


class CanaryReferences:
    """The references measured on one model, by what was measured (settings, voice, language):
    owned by the model, so the workers of a process that share it establish theirs once. The
    engine gives the same bytes for the same session (above), so the first measure stands for
    every later one; a failed one is not kept (the next worker measures again)."""

    def __init__(self) -> None:
        self._known: dict[Hashable, CanaryResult] = {}

    async def establish(self, canary: Canary, key: Hashable) -> CanaryResult:
        """`canary`'s reference: the one measured for `key` on this model, or a new measure."""
        reference = self._known.get(key)
        if reference is None:
            reference = await canary.establish()
            if reference.ok:
                self._known[key] = reference
        else:
            canary.reference = reference
        return reference
