"""Inference lanes: a first span never waits for a later span's compute.

One scheduler per synthesize process, shared by every synthesize stage in it (short and long
pools, a release lane), with one thread per lane — `slots` lanes, each running one model
call at a time on one intra-op thread (2 × 1 thread on 2 cores measured better than 1 × 2:
docs/performance.md). Jobs are first spans (a request's seq 0: what a caller waits for) or
bulk (everything else). The rules, in order:

1. A free lane takes the oldest first span, else the oldest bulk job: work-conserving, so
   saturation throughput is that of every lane busy.
2. Bulk jobs are bounded: a bulk Kokoro span is spoken as several model calls of about
   `piece_ms` of predicted compute each, cut at clause boundaries (`kokoro.clause_pieces`).
3. Priority lanes, where configured: `priority_slots` more threads that take only first spans,
   while bulk model calls run at a lower OS priority (`bulk_nice`, Linux thread nice, only for
   the duration of the onnxruntime call: it releases the GIL, so no niced thread ever holds
   it). A first span then never waits for a lane, and the kernel gives its thread the core a
   bulk run was using at once — no run is stopped, nothing is thrown away. A lane takes a
   first span only when no priority lane is free.
4. Preemption where it pays: when a first span arrives, every lane is busy and its predicted
   wait exceeds `preempt_after_ms`, the bulk job with the most predicted compute left is
   stopped (`RunOptions.terminate`) and queued again at the head of the bulk queue; its
   finished model calls are kept (`RunControl`), so what is thrown away is the one call
   that was stopped — counted as wasted compute.

Costs come from the `CostModel` fitted on every finished job. CPU-bound work runs on the
lanes' threads; the event loop only awaits futures.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from streamtts.processors.synthesize.cost_model import DEFAULT_PRIOR, PRIORS, CostModel, family
from streamtts.processors.synthesize.engine import CURRENT_RUN, RunControl, can_renice
from streamtts.processors.synthesize.exceptions import Preempted
from streamtts.runtime.jsonlog import log_event

log = logging.getLogger("streamtts.synthesize.lanes")

T = TypeVar("T")
Lane = Literal["first", "bulk"]

MIN_PIECE_PHONEMES = 40
"""A bulk piece is never cut shorter than this: a clause fragment loses its prosody."""


@dataclass(frozen=True)
class LaneStats:
    """How one job went through the lanes (logged and measured by the stage)."""

    lane: Lane
    engine: str
    predicted_ms: float
    waited_ms: float
    """Submission to its (last) start."""
    run_ms: float
    """Time on a lane, every attempt."""
    preemptions: int
    wasted_ms: float


@dataclass(frozen=True)
class LaneResult(Generic[T]):
    value: T
    stats: LaneStats


@dataclass(eq=False)
class _Job:
    fn: Callable[[], Any]
    lane: Lane
    engine: str
    chars: int
    predicted_ms: float
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    submitted: float
    control: RunControl = field(default_factory=RunControl)
    started: float | None = None
    run_ms: float = 0.0
    preemptions: int = 0
    cancelled: bool = False
    order: int = 0

    def remaining_ms(self, now: float) -> float:
        done = self.run_ms + ((now - self.started) * 1000.0 if self.started is not None else 0.0)
        return max(0.0, self.predicted_ms - done)


class InferenceLanes:
    """Thread-safe scheduler of model jobs over `slots` lanes (see the module doc)."""

    def __init__(
        self,
        slots: int,
        *,
        priority_slots: int = 0,
        bulk_nice: int = 0,
        cost: CostModel | None = None,
        preempt_after_ms: float = 500.0,
        piece_ms: float = 500.0,
        name: str = "synth",
    ) -> None:
        if slots < 1 or priority_slots < 0 or not 0 <= bulk_nice <= 19:
            raise ValueError("slots must be at least 1, priority_slots at least 0, bulk_nice 0-19")
        self.slots = slots
        self.priority_slots = priority_slots
        self.bulk_nice = bulk_nice
        self._renice: bool | None = None
        """Whether bulk calls can be niced here (probed by the first lane thread that asks)."""
        self._idle_priority = priority_slots
        self.cost = cost or CostModel()
        self.preempt_after_ms = preempt_after_ms
        self.piece_ms = piece_ms
        self._cond = threading.Condition()
        self._first: deque[_Job] = deque()
        self._bulk: deque[_Job] = deque()
        self._running: dict[int, _Job] = {}
        self._closed = False
        self._order = itertools.count()
        self.preemptions = 0
        self.wasted_ms = 0.0
        self.first_cost_ms = 0.0
        """Moving average of first spans' predicted compute: what one more waiting first span
        adds to the wait of a new one (the load report's estimate for spans not yet here)."""
        self._threads = [
            threading.Thread(target=self._serve, args=(i,), name=f"{name}-lane-{i}", daemon=True)
            for i in range(slots)
        ] + [
            threading.Thread(target=self._serve, args=(slots + i,), name=f"{name}-first-{i}", daemon=True)
            for i in range(priority_slots)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def first_capacity(self) -> int:
        """How many first spans run at once: every lane, priority lanes included."""
        return self.slots + self.priority_slots

    # -- the loop's side ----------------------------------------------------------------------
    def predict_ms(self, engine: str, *, chars: int, phonemes: int | None = None) -> float:
        return self.cost.predict_ms(engine, chars=chars, phonemes=phonemes)

    async def run(
        self,
        fn: Callable[[], T],
        *,
        first: bool,
        engine: str,
        chars: int,
        phonemes: int | None = None,
    ) -> LaneResult[T]:
        """Run `fn` (a whole span: G2P, model calls, post-processing) on a lane.

        Cancelled while waiting, the job leaves the queue; while running, it is stopped at
        its next model call and its result dropped.
        """
        loop = asyncio.get_running_loop()
        lane: Lane = "first" if first else "bulk"
        job = _Job(
            fn,
            lane,
            engine,
            chars,
            self.predict_ms(engine, chars=chars, phonemes=phonemes),
            loop,
            loop.create_future(),
            time.perf_counter(),
            order=next(self._order),
        )
        with self._cond:
            if self._closed:
                raise RuntimeError("the inference lanes are closed")
            if first:
                avg = self.first_cost_ms
                self.first_cost_ms = job.predicted_ms if avg == 0 else 0.9 * avg + 0.1 * job.predicted_ms
            (self._first if first else self._bulk).append(job)
            if first:
                self._preempt_for(job)
            self._cond.notify_all()  # a priority lane, or a lane that may take it, must wake
        try:
            value = await asyncio.shield(job.future)
        except asyncio.CancelledError:
            self._abandon(job)
            raise
        waited = ((job.started or job.submitted) - job.submitted) * 1000.0
        stats = LaneStats(
            lane, engine, job.predicted_ms, waited, job.run_ms, job.preemptions, job.control.wasted_ms
        )
        return LaneResult(value, stats)

    def predicted_first_wait_ms(self) -> float:
        """How long a first span submitted now is predicted to wait for a lane: what
        admission compares with a request's deadline, and a gauge."""
        now = time.perf_counter()
        with self._cond:
            ahead = sum(j.predicted_ms for j in self._first)
            if not self._first and (self._idle_priority or len(self._running) < self.first_capacity):
                return 0.0
            running = list(self._running.values())
            # A running bulk job is stopped for a first span only past `preempt_after_ms`: until
            # then the span waits for it (or for whichever lane frees first).
            free_at = min(
                (
                    min(j.remaining_ms(now), self.preempt_after_ms)
                    if j.lane == "bulk" and not j.control.preempted
                    else j.remaining_ms(now)
                    for j in running
                ),
                default=0.0,
            )
            # First lanes add threads, not cores: queued first spans drain at the lanes' rate.
            return free_at + ahead / self.slots

    def queued(self) -> dict[Lane, int]:
        with self._cond:
            return {"first": len(self._first), "bulk": len(self._bulk)}

    def close(self) -> None:
        """Stop the lanes: queued jobs are cancelled, running ones stopped at their next call."""
        with self._cond:
            self._closed = True
            for job in (*self._first, *self._bulk):
                job.cancelled = True
                job.loop.call_soon_threadsafe(_cancel, job.future)
            self._first.clear()
            self._bulk.clear()
            for job in self._running.values():
                job.cancelled = True
                job.control.stop()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=5.0)

    # -- decisions (under the lock) -------------------------------------------------------------
    def _preempt_for(self, job: _Job) -> None:
        """Stop a bulk job if `job` (a first span) would otherwise wait past the budget."""
        idle = self.first_capacity - len(self._running)
        stopping = sum(1 for j in self._running.values() if j.control.preempted)
        if len(self._first) <= idle + stopping:
            return  # a lane is (or is about to be) free for it
        now = time.perf_counter()
        wait = min((j.remaining_ms(now) for j in self._running.values()), default=0.0)
        if wait <= self.preempt_after_ms:
            return
        victims = [j for j in self._running.values() if j.lane == "bulk" and not j.control.preempted]
        if not victims:
            return  # every lane speaks a first span: it waits its turn
        victim = max(victims, key=lambda j: j.remaining_ms(now))
        victim.control.stop()
        log_event(
            log,
            "bulk_preempted",
            engine=victim.engine,
            remaining_ms=round(victim.remaining_ms(now), 1),
            for_engine=job.engine,
            predicted_wait_ms=round(wait, 1),
        )

    def _piece_phonemes(self, job: _Job) -> int | None:
        """The longest piece of a bulk job, in phonemes: `piece_ms` at the engine family's
        prior cost, not at the fitted one. Where a span is cut changes its audio, and a cut
        that followed the fit made a request's audio depend on the worker's history and load
        (the in-memory topology found a zh span spoken whole there and in two pieces on a busy
        worker); from the prior, a span's audio depends on the request and the settings only."""
        if job.lane == "first" or self.piece_ms <= 0:
            return None
        prior = PRIORS.get(family(job.engine), DEFAULT_PRIOR)
        fit = (self.piece_ms - prior.intercept_ms) / prior.ms_per_phoneme
        return max(MIN_PIECE_PHONEMES, int(fit))

    # -- the lanes' threads -------------------------------------------------------------------
    def _serve(self, slot: int) -> None:
        priority = slot >= self.slots
        if not priority and self.bulk_nice:
            self._probe_renice()
        while True:
            with self._cond:
                while not self._closed and not self._work_for(priority):
                    self._cond.wait()
                if self._closed:
                    return
                takes_first = bool(self._first) and (priority or not self._idle_priority)
                job = self._first.popleft() if takes_first else self._bulk.popleft()
                if priority:
                    self._idle_priority -= 1
                    if self._first and not self._idle_priority:
                        self._cond.notify_all()  # the lanes may take the first spans left
                job.started = time.perf_counter()
                self._running[slot] = job
                job.control.rearm()
                job.control.nice = self.bulk_nice if job.lane == "bulk" and self._renice else 0
                if job.preemptions == 0:
                    # Fixed at the first attempt: the same cuts again, so the calls a stopped job
                    # finished are found (keyed by their inputs) and only the stopped one is redone.
                    job.control.piece_phonemes = self._piece_phonemes(job)
            self._attempt(slot, job)

    def _work_for(self, priority: bool) -> bool:
        if priority:
            return bool(self._first)
        return bool(self._bulk) or (bool(self._first) and not self._idle_priority)

    def _probe_renice(self) -> None:
        with self._cond:
            if self._renice is not None:
                return
            self._renice = can_renice()
        if not self._renice:
            log_event(
                log,
                "lane_priority_unchanged",
                logging.WARNING,
                reason="this thread may not lower its nice back (Linux with CAP_SYS_NICE or RLIMIT_NICE)",
            )

    def _attempt(self, slot: int, job: _Job) -> None:
        token = CURRENT_RUN.set(job.control)
        outcome: tuple[str, Any]
        try:
            outcome = ("ok", job.fn())
        except Preempted:
            outcome = ("preempted", None)
        except BaseException as err:  # handed to the awaiting task, which decides
            outcome = ("error", err)
        finally:
            CURRENT_RUN.reset(token)
        assert job.started is not None
        elapsed = (time.perf_counter() - job.started) * 1000.0
        with self._cond:
            del self._running[slot]
            if slot >= self.slots:
                self._idle_priority += 1
            job.run_ms += elapsed
            job.started = None if outcome[0] == "preempted" else job.started
            if job.cancelled:  # abandoned or closed: whoever still awaits it is told
                job.loop.call_soon_threadsafe(_cancel, job.future)
                return
            if outcome[0] == "preempted":
                job.preemptions += 1
                self.preemptions += 1
                self._bulk.appendleft(job)
                self._cond.notify_all()
                return
            self.wasted_ms += job.control.wasted_ms
        if outcome[0] == "ok" and job.control.tokens:
            # The lane's whole hold (G2P, calls, post-processing) minus stopped calls.
            self.cost.observe(
                job.engine,
                chars=job.chars,
                phonemes=job.control.tokens,
                ms=max(0.0, job.run_ms - job.control.wasted_ms),
            )
        if outcome[0] == "ok":
            job.loop.call_soon_threadsafe(_resolve, job.future, outcome[1], None)
        else:
            job.loop.call_soon_threadsafe(_resolve, job.future, None, outcome[1])

    def _abandon(self, job: _Job) -> None:
        with self._cond:
            job.cancelled = True
            if job in self._first:
                self._first.remove(job)
            elif job in self._bulk:
                self._bulk.remove(job)
            else:
                job.control.stop()


def _resolve(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _cancel(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.cancel()
