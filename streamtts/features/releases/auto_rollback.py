"""Automatic rollback: follow the completion results of both lanes, judge the candidate with
`ReleaseGuard`, and on a breach write the rollback to `tts.config` with its reason.

It reads `tts.results` whole (no consumer group: every guard sees every result) from
`lookback_s` back, so a guard restarted mid-canary judges the same window; only results
completed after the canary's rule was written count. Runs inside the worker that runs the
segment stage (default) or alone as `streamtts release guard`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

from aiokafka import TopicPartition

from streamtts.features.releases.guard import Breach, Outcome, ReleaseGuard
from streamtts.features.releases.redrive import Redrive, redrive_lane
from streamtts.features.releases.store import rolled_back, write_release
from streamtts.features.releases.watch import ReleaseWatch
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import make_consumer, topic_partitions
from streamtts.runtime.lifecycle import AsyncLifecycle, cancel_and_wait
from streamtts.runtime.records import parsed
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult, ReleaseConfig
from streamtts.schemas.release import BASE_RELEASE

log = logging.getLogger("streamtts.release_guard")

REFUSED_GRACE_S = 3.0
"""A lane refused for this long with still no member is a breach (a worker that is joining
its group right now gets the benefit of the doubt; its requests went to stable meanwhile)."""
REDRIVE_WINDOW_S = 3600.0
"""How long after a rollback the guard keeps watching the candidate's lane for stranded
requests (a crashed member leaves its group after its session timeout; a late one, later)."""

RESULTS_WAIT_MS = 1000
"""Longest a result waits on the broker before the guard reads it."""
RESULTS_BATCH_BYTES = 32 * 1024
"""Results (under 1 KB each) the broker gathers before it answers the guard's fetch early."""


class AutoRollback(AsyncLifecycle):
    def __init__(
        self,
        kafka: KafkaSettings,
        telemetry: Telemetry,
        *,
        releases: ReleaseWatch | None = None,
        lookback_s: float = 3600.0,
        poll_ms: int = 200,
    ) -> None:
        """releases: a running watch of `tts.config` to share (the worker's); None: its own."""
        self.kafka = kafka
        self.topics = TopicNames(kafka.topic_prefix)
        self.telemetry = telemetry
        self._own_watch = releases is None
        self.releases = releases or ReleaseWatch(kafka, self.topics.config)
        self.lookback_s = lookback_s
        self.poll_ms = poll_ms
        self.guard: ReleaseGuard | None = None
        self._judged: tuple[int, str] | None = None
        """(version, candidate) the guard's windows belong to."""
        self._rolled_back: set[int] = set()
        """Rule versions this guard already rolled back (never twice for one)."""
        # Judging a second late costs nothing; a fetch per result costs the broker under
        # load (one per request at capacity): the broker answers at RESULTS_BATCH_BYTES or
        # after RESULTS_WAIT_MS, whichever comes first.
        self._consumer = make_consumer(
            kafka,
            group_id=None,
            max_poll_records=1000,
            fetch_min_bytes=RESULTS_BATCH_BYTES,
            fetch_max_wait_ms=RESULTS_WAIT_MS,
        )
        self._task: asyncio.Task[None] | None = None
        self.breaches: list[tuple[ReleaseConfig, Breach]] = []
        """Rollbacks this guard wrote: the rule it rolled back and why."""
        self.redriven: list[Redrive] = []
        """Re-drives of rolled-back lanes this guard ran."""

    async def start(self) -> None:
        if self._own_watch:
            await self.releases.start()
        await asyncio.wait_for(self.releases.caught_up.wait(), timeout=30)
        await self._consumer.start()
        partitions = sorted(await topic_partitions(self.kafka, self.topics.results))
        tps = [TopicPartition(self.topics.results, p) for p in partitions]
        if tps:
            self._consumer.assign(tps)
            since = int((time.time() - self.lookback_s) * 1000)
            found = await self._consumer.offsets_for_times({tp: since for tp in tps})
            ends = await self._consumer.end_offsets(tps)
            for tp in tps:
                at = found.get(tp)
                self._consumer.seek(tp, at.offset if at is not None else ends[tp])
        self._task = asyncio.create_task(self._run(), name="release-guard")
        log_event(log, "release_guard_started", results=self.topics.results, lookback_s=self.lookback_s)

    async def _run(self) -> None:
        while True:
            try:
                batch = await self._consumer.getmany(timeout_ms=self.poll_ms)
            except Exception as err:  # Kafka trouble: judge later, never on a partial view
                log_event(log, "results_read_failed", logging.WARNING, error=str(err)[:200])
                await asyncio.sleep(1.0)
                continue
            results = list(parsed(batch, CompletionResult))
            for result in results:
                # Whatever rule is in force: a request finished while no canary ran must not
                # count as stalled when the next canary of the same candidate starts.
                self.releases.in_flight.pop(result.request_id, None)
            guard = self._guard_for(self.releases.current)
            if guard is None:
                await self._drain_rolled_back(self.releases.current)
                continue
            since = self.releases.current.updated_at
            for report in list(self.releases.canaries.values()):
                if report.at >= since:  # a canary that failed before this canary rule is old news
                    guard.canary(report.release, report.ok, f"{report.worker}: {report.reason or 'failed'}")
            for result in results:
                if result.completed_at >= since:
                    guard.observe(_outcome(result))
            breach = self._stalled(guard) or await self._no_consumer(guard) or guard.verdict()
            if breach is not None:
                await self._roll_back(self.releases.current, guard, breach)

    def _stalled(self, guard: ReleaseGuard) -> Breach | None:
        """A request routed to the candidate by this process with no result for longer than
        `max_pending_s`: the candidate renders nothing (no workers, stuck, or dead-lettering),
        which no rate would ever show."""
        limit = guard.limits.max_pending_s
        now = time.monotonic()
        waiting = [at for release, at in self.releases.in_flight.values() if release == guard.candidate]
        late = [at for at in waiting if now - at > limit]
        if not late:
            return None
        return Breach(
            "stalled",
            f"{len(late)} request(s) routed to {guard.candidate} have no result after "
            f"{limit:.0f} s (the oldest {now - min(late):.0f} s)",
        )

    async def _no_consumer(self, guard: ReleaseGuard) -> Breach | None:
        """The candidate's lane has no live consumer while requests need it: segments wait on
        it unread (stranded), or the segment stage kept requests off it. Seen within one lane
        check (`LaneHealth.ttl_s`) of the group emptying: for a crashed worker, its session
        timeout."""
        lanes = self.releases.lanes
        try:
            states = await lanes.states(guard.candidate)
        except Exception as err:  # Kafka trouble: no verdict on a partial view
            log_event(
                log, "lane_check_failed", logging.WARNING, release=guard.candidate, error=str(err)[:200]
            )
            return None
        stranded = [s for s in states if s.stranded]
        if stranded:
            return Breach(
                "no_consumer",
                "; ".join(
                    f"{s.unconsumed} segment(s) on the {s.pool} lane and no live consumer in {s.group}"
                    for s in stranded
                ),
            )
        refused_at = lanes.refused.get(guard.candidate)
        if (
            refused_at is not None
            and time.monotonic() - refused_at >= REFUSED_GRACE_S
            and not any(s.members for s in states)
        ):
            return Breach(
                "no_consumer", f"no live consumer in {guard.candidate}'s lane: requests kept on stable"
            )
        return None

    async def _drain_rolled_back(self, rule: ReleaseConfig) -> None:
        """After a rollback (this guard's, another's or an operator's), re-drive whatever the
        candidate's lane still strands: its group may empty only later (a crashed member's
        session timing out), or the rollback was written by hand without a re-drive."""
        if rule.state != "rolled_back" or rule.candidate is None:
            return
        if (datetime.now(UTC) - rule.updated_at).total_seconds() > REDRIVE_WINDOW_S:
            return  # long settled: no admin calls forever for an old rollback
        try:
            states = await self.releases.lanes.states(rule.candidate)
        except Exception as err:
            log_event(log, "lane_check_failed", logging.WARNING, release=rule.candidate, error=str(err)[:200])
            return
        if any(s.stranded for s in states):
            await self._redrive(rule.candidate, rule.stable)

    async def _redrive(self, candidate: str, stable: str) -> None:
        try:
            done = await redrive_lane(self.kafka, candidate, stable, topics=self.topics)
        except Exception as err:  # retried on the next lane check while it strands anything
            log_event(log, "release_redrive_failed", logging.ERROR, release=candidate, error=str(err)[:200])
            return
        self.redriven.append(done)
        self.releases.lanes.forget(candidate)  # its offsets moved: measure afresh

    def _guard_for(self, rule: ReleaseConfig) -> ReleaseGuard | None:
        """The guard of the canary in force (fresh windows for each new canary rule)."""
        if not rule.routing or rule.candidate is None or rule.version in self._rolled_back:
            self.guard = None
            self._judged = None
            return None
        if self._judged != (rule.version, rule.candidate):
            self.guard = ReleaseGuard(rule.stable, rule.candidate, rule.limits)
            self.releases.lanes.refused.pop(rule.candidate, None)  # judge this rule's lanes afresh
            self._judged = (rule.version, rule.candidate)
        return self.guard

    async def _roll_back(self, rule: ReleaseConfig, guard: ReleaseGuard, breach: Breach) -> None:
        assert rule.candidate is not None
        self._rolled_back.add(rule.version)
        reason = f"automatic rollback: {breach.reason}: {breach.detail}"
        try:
            await write_release(self.kafka, self.topics.config, rolled_back(rule, reason=reason, by="guard"))
        except Exception as err:  # not written: judge again on the next batch
            self._rolled_back.discard(rule.version)
            log_event(
                log, "release_rollback_failed", logging.ERROR, release=rule.candidate, error=str(err)[:200]
            )
            return
        self.telemetry.release_rollbacks.labels(rule.candidate, breach.reason).inc()
        self.breaches.append((rule, breach))
        log_event(
            log,
            "release_rolled_back",
            logging.ERROR,  # an alert: a candidate was pulled from traffic
            release=rule.candidate,
            stable=rule.stable,
            reason=breach.reason,
            detail=breach.detail,
            version=rule.version,
            candidate_stats=guard.stats(rule.candidate).as_dict(),
            stable_stats=guard.stats(rule.stable).as_dict(),
        )
        # What the candidate's lane holds and nobody reads goes to stable, once.
        await self._redrive(rule.candidate, rule.stable)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        await self._consumer.stop()
        if self._own_watch:
            await self.releases.stop()


def _outcome(result: CompletionResult) -> Outcome:
    return Outcome(
        release=result.release or BASE_RELEASE,
        failed=result.status == "failed",
        degraded=bool(result.degraded),
        first_audio_ms=result.first_audio_ms,
    )
