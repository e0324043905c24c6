"""Inference lanes: first spans ahead of bulk work, bounded bulk calls, preemption that keeps
finished calls, and the cost model the decisions rest on."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest

from streamtts.processors.synthesize.cost_model import CostModel
from streamtts.processors.synthesize.engine import CURRENT_RUN, run_session
from streamtts.processors.synthesize.kokoro import MAX_PHONEMES, clause_pieces
from streamtts.processors.synthesize.lanes import InferenceLanes
from streamtts.runtime.read_ahead import FirstSegmentsFirst


class StoppableSession:
    """Stands in for an onnxruntime session: a run takes `run_s` unless its RunOptions'
    terminate flag is set, checked between "operators" as onnxruntime does."""

    def __init__(self, run_s: float) -> None:
        self.run_s = run_s
        self.runs: list[int] = []
        self.started = threading.Event()

    def run(self, outputs: Any, feeds: dict[str, np.ndarray], options: Any = None) -> list[np.ndarray]:
        self.started.set()
        end = time.perf_counter() + self.run_s
        while time.perf_counter() < end:
            if options is not None and options.terminate:
                raise RuntimeError("Exiting due to terminate flag being set to true.")
            time.sleep(0.002)
        self.runs.append(int(feeds["piece"][0]))
        return [feeds["piece"].astype(np.float32)]


def _pieces_job(session: StoppableSession, n: int) -> Any:
    def job() -> list[int]:
        return [int(run_session(session, {"piece": np.array([k])}, tokens=50)[0][0]) for k in range(n)]

    return job


async def test_a_first_span_takes_the_lane_before_older_bulk_work() -> None:
    lanes = InferenceLanes(1, preempt_after_ms=10_000)
    order: list[str] = []
    gate = threading.Event()

    def blocker() -> None:
        gate.wait(10)
        order.append("blocker")

    def named(name: str) -> Any:
        return lambda: order.append(name)

    try:
        running = asyncio.ensure_future(lanes.run(blocker, first=False, engine="piper", chars=0))
        await asyncio.to_thread(lambda: _until(lambda: bool(lanes._running)))
        queued = [
            asyncio.ensure_future(lanes.run(named("bulk-1"), first=False, engine="piper", chars=10)),
            asyncio.ensure_future(lanes.run(named("bulk-2"), first=False, engine="piper", chars=10)),
        ]
        await asyncio.to_thread(lambda: _until(lambda: lanes.queued()["bulk"] == 2))
        first = asyncio.ensure_future(lanes.run(named("first"), first=True, engine="piper", chars=10))
        await asyncio.to_thread(lambda: _until(lambda: lanes.queued()["first"] == 1))
        gate.set()
        await asyncio.gather(running, first, *queued)
    finally:
        await asyncio.to_thread(lanes.close)
    assert order == ["blocker", "first", "bulk-1", "bulk-2"]


async def test_a_stopped_bulk_job_keeps_its_finished_calls_and_the_first_span_starts_at_once() -> None:
    session = StoppableSession(run_s=0.4)
    lanes = InferenceLanes(1, preempt_after_ms=50)
    try:
        bulk = asyncio.ensure_future(
            lanes.run(_pieces_job(session, 4), first=False, engine="kokoro", chars=400)
        )
        # Wait until the bulk job is inside its second call: its first one is done.
        await asyncio.to_thread(lambda: _until(lambda: len(session.runs) == 1))
        first = await lanes.run(lambda: "spoken", first=True, engine="piper", chars=20)
        done = await bulk
    finally:
        await asyncio.to_thread(lanes.close)
    assert first.value == "spoken"
    assert first.stats.waited_ms < 400  # it did not wait for the call in progress to end
    assert done.value == [0, 1, 2, 3]  # the job's result is whole and in order
    assert done.stats.preemptions == 1
    assert session.runs == [0, 1, 2, 3]  # call 0 was kept, call 1 was redone, none twice
    assert 0 < done.stats.wasted_ms < 400
    assert lanes.preemptions == 1


async def test_a_first_span_waits_for_another_first_span_rather_than_stopping_it() -> None:
    session = StoppableSession(run_s=0.3)
    lanes = InferenceLanes(1, preempt_after_ms=10)
    try:
        one = asyncio.ensure_future(
            lanes.run(_pieces_job(session, 2), first=True, engine="kokoro", chars=300)
        )
        await asyncio.to_thread(session.started.wait, 5)
        two = await lanes.run(lambda: "second", first=True, engine="piper", chars=20)
        done = await one
    finally:
        await asyncio.to_thread(lanes.close)
    assert done.stats.preemptions == 0 and two.value == "second"
    assert session.runs == [0, 1]


async def test_cancelled_jobs_leave_the_queue_and_running_ones_are_dropped() -> None:
    session = StoppableSession(run_s=5.0)
    lanes = InferenceLanes(1, preempt_after_ms=10_000)
    ran: list[str] = []
    try:
        running = asyncio.ensure_future(
            lanes.run(_pieces_job(session, 1), first=False, engine="kokoro", chars=9)
        )
        await asyncio.to_thread(session.started.wait, 5)
        queued = asyncio.ensure_future(
            lanes.run(lambda: ran.append("queued"), first=False, engine="piper", chars=5)
        )
        await asyncio.to_thread(lambda: _until(lambda: lanes.queued()["bulk"] == 1))
        queued.cancel()
        running.cancel()
        after = await lanes.run(lambda: "next", first=True, engine="piper", chars=5)
    finally:
        await asyncio.to_thread(lanes.close)
    assert after.value == "next"
    assert ran == [] and session.runs == []  # the queued job never ran, the running one was stopped


def test_run_session_outside_lanes_is_a_plain_run() -> None:
    session = StoppableSession(run_s=0.0)
    assert CURRENT_RUN.get() is None
    out = run_session(session, {"piece": np.array([7])}, tokens=1)
    assert int(out[0][0]) == 7


def test_clause_pieces_cut_only_at_clause_boundaries_and_lose_nothing() -> None:
    clauses = ["ðɪs ɪz wˈʌn,", "ænd ðɪs ɪz tˈuː;", "θɹˈiː kˈʌmz nˈɛkst.", "ænd fˈɔːɹ ɛndz ɪt!"]
    text = " ".join(clauses)
    pieces = clause_pieces(text, budget=30)
    assert " ".join(pieces) == text
    assert all(p.endswith((",", ";", ".", "!")) for p in pieces)  # never inside a clause
    assert len(pieces) > 1
    # A clause longer than the budget stays whole; the model's own limit still holds.
    long = "wˈʌn tˈuː θɹˈiː " * 60 + "."
    assert all(len(p) <= MAX_PHONEMES for p in clause_pieces(long, budget=30))
    assert clause_pieces("ʃˈɔːɹt.", budget=30) == ["ʃˈɔːɹt."]


def test_the_cost_model_fits_each_engine_from_its_runs() -> None:
    model = CostModel()
    for x in (20, 60, 120, 240, 40, 180) * 10:
        model.observe("kokoro", chars=x, phonemes=int(x * 1.2), ms=80.0 + 11.0 * x * 1.2)
        model.observe("piper:en_joe", chars=x, phonemes=x, ms=10.0 + 0.8 * x)
    assert model.predict_ms("kokoro", phonemes=200) == pytest.approx(80 + 11 * 200, rel=0.05)
    assert model.predict_ms("kokoro", chars=100) == pytest.approx(80 + 11 * 120, rel=0.08)
    assert model.predict_ms("piper:en_amy", phonemes=100) == pytest.approx(90, rel=0.1)  # one family
    snap = model.snapshot()
    assert snap["kokoro"]["ms_per_phoneme"] == pytest.approx(11, rel=0.05)
    assert snap["piper"]["runs"] == 60


async def test_get_where_takes_the_first_ready_item_in_queue_order() -> None:
    queue: FirstSegmentsFirst[str] = FirstSegmentsFirst(8)
    for name, first in (("a1", False), ("b0", True), ("a0", True), ("c1", False)):
        await queue.put(name, first=first)
    busy = {"b"}
    assert await queue.get_where(lambda item, first: item[0] not in busy) == "a0"
    assert await queue.get_where(lambda item, first: item[0] not in busy) == "a1"
    waiter = asyncio.ensure_future(queue.get_where(lambda item, first: first))
    await asyncio.sleep(0)
    assert await asyncio.wait_for(waiter, 1) == "b0"
    blocked = asyncio.ensure_future(queue.get_where(lambda item, first: item[0] not in busy))
    busy.add("c")
    await asyncio.sleep(0)
    assert not blocked.done()
    busy.clear()
    await queue.wake()
    assert await asyncio.wait_for(blocked, 1) == "c1"


PARAGRAPH = (
    "Your order left our warehouse this morning, and the carrier expects to deliver it on "
    "Thursday; you will receive a tracking link by email, and if anything changes, we will "
    "call you at the number on your account."
)


async def test_a_piper_first_span_behind_a_kokoro_paragraph_starts_within_its_budget(registry: Any) -> None:
    """The real engines on one lane: without preemption the greeting would wait for the whole
    paragraph (seconds of Kokoro compute); with it, it starts within the budget, and the
    paragraph, stopped and resumed, is the same audio as rendered undisturbed."""
    from streamtts.processors.synthesize.synthesizer import Synthesizer

    synth = Synthesizer(registry)
    registry.warm_up(("jm_kumo", "en_joe"), langs=("en",))
    budget_ms = 300.0
    lanes = InferenceLanes(1, preempt_after_ms=budget_ms, piece_ms=400.0)

    def paragraph() -> np.ndarray:
        chunks = synth.synthesize_span(PARAGRAPH, "en", "jm_kumo", 1.0, None)
        return np.concatenate([c.samples for c in chunks])

    def greeting() -> np.ndarray:
        return np.concatenate(
            [c.samples for c in synth.synthesize_span("Thanks for calling.", "en", "en_joe", 1.0, None)]
        )

    try:
        undisturbed = await lanes.run(paragraph, first=False, engine="kokoro", chars=len(PARAGRAPH))
        assert undisturbed.stats.preemptions == 0
        started = threading.Event()
        real = lanes._attempt

        def spy(slot: int, job: Any) -> None:
            if job.lane == "bulk":
                started.set()
            real(slot, job)

        lanes._attempt = spy  # type: ignore[method-assign]
        bulk = asyncio.ensure_future(lanes.run(paragraph, first=False, engine="kokoro", chars=len(PARAGRAPH)))
        await asyncio.to_thread(started.wait, 10)
        first = await lanes.run(greeting, first=True, engine="piper:en_joe", chars=19)
        resumed = await bulk
    finally:
        await asyncio.to_thread(lanes.close)
    assert first.value.size > 0.5 * 22050  # the greeting was spoken: over half a second of audio
    assert resumed.stats.preemptions == 1
    # Within its own budget, plus the time onnxruntime takes to see the flag between operators.
    assert first.stats.waited_ms < budget_ms + 200, first.stats
    assert undisturbed.stats.run_ms > 3 * budget_ms  # the paragraph alone holds the lane far longer
    assert resumed.value.shape == undisturbed.value.shape
    assert np.allclose(resumed.value, undisturbed.value, atol=1e-4)


def _until(cond: Any, timeout_s: float = 10.0) -> None:
    """Poll a condition on the lanes' state from a worker thread (no event to await there)."""
    end = time.perf_counter() + timeout_s
    while not cond():
        if time.perf_counter() > end:
            raise AssertionError("condition not reached")
        time.sleep(0.001)


async def test_a_requests_later_segment_never_overtakes_its_first_one() -> None:
    """The first-span slot is taken (by request a), the bulk slot is free: b's second segment
    must still wait for b's first one, or b's audio would leave out of order (seen in the suite:
    word offsets of 0 ms on seq 1, its seq 0 not yet published)."""
    queue: FirstSegmentsFirst[str] = FirstSegmentsFirst(8)
    await queue.put("b0", first=True)
    await queue.put("b1", first=False)
    await queue.put("c1", first=False)  # a later segment whose first one is not queued here
    first_slot_free = False

    def ready(item: str, first: bool) -> bool:
        return first_slot_free or not first

    assert await queue.get_where(ready, key=lambda item: item[0]) == "c1"
    blocked = asyncio.ensure_future(queue.get_where(ready, key=lambda item: item[0]))
    await asyncio.sleep(0)
    assert not blocked.done(), "b1 overtook b0"
    first_slot_free = True
    await queue.wake()
    assert await asyncio.wait_for(blocked, 1) == "b0"
    assert await queue.get_where(ready, key=lambda item: item[0]) == "b1"


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


class NiceSession:
    """Stands in for an onnxruntime session: a run reports the thread's nice while it runs."""

    def run(self, outputs: Any, feeds: dict[str, np.ndarray], options: Any = None) -> list[Any]:
        return [(threading.current_thread().name, _nice())]


def _job(gate: threading.Event | None = None) -> Any:
    """A span: Python work around one model call; returns (lane, nice in the call, nice outside)."""

    def job() -> tuple[str, int, int]:
        if gate is not None:
            gate.wait(10)
        name, during = run_session(NiceSession(), {"x": np.zeros(1)}, tokens=1)[0]
        return name, during, _nice()

    return job


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
async def test_a_first_span_starts_on_a_first_lane_while_every_lane_runs_bulk_and_stops_nothing() -> None:
    lanes = InferenceLanes(1, priority_slots=1, bulk_nice=7, preempt_after_ms=10)
    gate = threading.Event()
    base = _nice()
    try:
        bulk = asyncio.ensure_future(lanes.run(_job(gate), first=False, engine="kokoro", chars=400))
        queued = asyncio.ensure_future(lanes.run(_job(), first=False, engine="kokoro", chars=400))
        await asyncio.to_thread(lambda: _until(lambda: bool(lanes._running) and lanes.queued()["bulk"] == 1))
        first = await asyncio.wait_for(lanes.run(_job(), first=True, engine="piper", chars=20), 5)
        assert not bulk.done()  # it ran beside the bulk job, which was neither awaited nor stopped
        gate.set()
        done, later = await bulk, await queued
    finally:
        await asyncio.to_thread(lanes.close)
    assert first.value == ("synth-first-0", base, base)  # a first lane, at the process's priority
    assert first.stats.waited_ms < 1000
    assert done.stats.preemptions == 0 and lanes.preemptions == 0
    # Bulk work never goes to the first lane (free while `queued` waited); its model call runs
    # nicer, and only the call: the thread is back at its own priority around it (GIL holders).
    assert done.value == later.value == ("synth-lane-0", min(19, base + 7), base)


async def test_a_lane_takes_a_first_span_only_when_every_first_lane_is_busy() -> None:
    lanes = InferenceLanes(1, priority_slots=1, preempt_after_ms=10_000)
    gate = threading.Event()

    def held() -> str:
        gate.wait(10)
        return threading.current_thread().name

    def name() -> str:
        return threading.current_thread().name

    try:
        alone = await lanes.run(name, first=True, engine="piper", chars=5)
        one = asyncio.ensure_future(lanes.run(held, first=True, engine="piper", chars=5))
        await asyncio.to_thread(lambda: _until(lambda: bool(lanes._running)))
        two = await asyncio.wait_for(lanes.run(name, first=True, engine="piper", chars=5), 5)
        gate.set()
        first_one = await one
    finally:
        await asyncio.to_thread(lanes.close)
    assert alone.value == "synth-first-0"  # both idle: the first lane takes it
    assert first_one.value == "synth-first-0"
    assert two.value == "synth-lane-0"  # the first lane busy: a lane serves it rather than queue it
    assert lanes.first_capacity == 2


def test_first_lanes_default_to_one_per_lane_and_zero_turns_them_off() -> None:
    from streamtts.processors.synthesize.speech_stack import build_lanes
    from streamtts.runtime.pipeline_settings import PipelineSettings

    default = build_lanes(PipelineSettings.from_env({"STREAMTTS_SYNTH_LANES": "3"}))
    off = build_lanes(
        PipelineSettings.from_env({"STREAMTTS_SYNTH_LANES": "3", "STREAMTTS_SYNTH_FIRST_LANES": "0"})
    )
    assert default is not None and off is not None
    try:
        assert (default.slots, default.priority_slots, default.first_capacity, default.bulk_nice) == (
            3,
            3,
            6,
            10,
        )
        assert (off.slots, off.priority_slots, off.first_capacity, off.bulk_nice) == (3, 0, 3, 0)
    finally:
        default.close()
        off.close()


async def test_where_a_bulk_span_is_cut_does_not_follow_the_workers_history() -> None:
    """The piece budget of a bulk job comes from the engine's prior cost, not from the fit:
    a worker that has seen slow runs cuts a span where a fresh one does, so a request's
    audio does not depend on the worker's load (the in-memory topology found it did)."""

    def budget() -> int | None:
        control = CURRENT_RUN.get()
        return control.piece_phonemes if control is not None else None

    lanes = InferenceLanes(1, piece_ms=500.0)
    try:
        fresh = await lanes.run(budget, first=False, engine="kokoro", chars=200)
        for _ in range(50):  # a busy worker: every run three times the prior's cost
            lanes.cost.observe("kokoro", chars=100, phonemes=100, ms=3 * (60.0 + 9.0 * 100))
        busy = await lanes.run(budget, first=False, engine="kokoro", chars=200)
        first = await lanes.run(budget, first=True, engine="kokoro", chars=200)
    finally:
        lanes.close()
    assert fresh.value is not None and fresh.value == busy.value
    assert first.value is None  # a first span is never cut
