"""A gray release end to end on real Kafka with the real model and real workers.

A stable lane (segment, synthesize, encode, sink + the release guard) and a candidate lane
(a synthesize worker started for release "joe-v2", whose inference budget is too tight for
the model, so every span it renders degrades to the fallback clip). `streamtts release set
joe-v2 --percent 10` sends ~10 % of the requests to it; the guard sees the candidate degrade
and rolls it back; new requests go to stable within 2 s; every request completes once.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from datetime import UTC, datetime

import orjson
import pytest
from aiokafka import TopicPartition

from streamtts.features.releases.routing import route
from streamtts.features.releases.store import rolled_back, with_canary, write_release
from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.kafka import make_consumer, make_producer, topic_partitions
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult, Delivery, ReleaseConfig, TTSRequest
from streamtts.schemas.headers import RELEASE
from streamtts.worker import Worker
from tests.helpers import cli_env, metric
from tests.services import Services

pytestmark = [pytest.mark.integration, pytest.mark.model]

CANDIDATE = "joe-v2"
TENANTS = ("acme", "globex", "initech")


def _cli(kafka: KafkaSettings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamtts.cli.main", "release", *args],
        env=cli_env(kafka),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _requests(n: int, start: int) -> list[TTSRequest]:
    # Short English prompts for the fast Piper voice; results only (no object storage), so the
    # test measures routing, not uploads. Fixed ids: the sticky buckets, hence the expected
    # split (17 of the 150-request burst below 10 %), are the same on every run.
    return [
        TTSRequest.new(
            f"Ticket {start + i} is ready.",
            request_id=f"gray-{start + i:05d}",
            language="en",
            voice="en_joe",
            format="pcm",
            tenant=TENANTS[i % len(TENANTS)],
            delivery=Delivery(chunks=True, storage=False),
        )
        for i in range(n)
    ]


class RoutedLog(logging.Handler):
    """The segment stage's "segmented" events: which release and rule version routed each request."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.routed: dict[str, tuple[str | None, int | None]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "segmented":
            self.routed[record.request_id] = (record.release, record.rule_version)  # type: ignore[attr-defined]


async def _until(check, timeout_s: float, what: str, interval_s: float = 0.02):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(interval_s)


async def _all_results(kafka: KafkaSettings, topic: str) -> list[CompletionResult]:
    """Every record on the results topic (to count completions per request)."""
    consumer = make_consumer(kafka, group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(await topic_partitions(kafka, topic))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        out: list[CompletionResult] = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            batch = await consumer.getmany(timeout_ms=1000)
            out += [CompletionResult.from_bytes(r.value) for rs in batch.values() for r in rs]
        return out
    finally:
        await consumer.stop()


async def test_gray_release_splits_traffic_rolls_back_on_a_breach_and_loses_nothing(
    kafka_settings: KafkaSettings,
    services: Services,
    topics: TopicNames,
    speech_renderer,  # type: ignore[no-untyped-def]
    pipeline_settings: PipelineSettings,
) -> None:
    from streamtts.processors.synthesize.renderer import SegmentRenderer
    from streamtts.processors.synthesize.speech_stack import budgets_of

    settings = Settings(kafka=kafka_settings, s3=services.s3)
    pipeline = pipeline_settings.replace(render_cache=False)
    # The candidate's synthesize configuration: the same voices, a 10 ms inference budget
    # (what STREAMTTS_INFERENCE_BUDGET_S=0.01 STREAMTTS_INFERENCE_BUDGET_PER_CHAR_S=0 give).
    bad = pipeline.replace(release=CANDIDATE, inference_budget_s=0.01, inference_budget_per_char_s=0.0)
    candidate_renderer = SegmentRenderer(speech_renderer.synth, budgets=budgets_of(bad))
    candidate = Worker(["synthesize"], settings, bad, renderer=candidate_renderer, pools=["short"], ops=False)
    stable = Worker(
        ["segment", "synthesize", "encode", "sink"], settings, pipeline, renderer=speech_renderer, ops=False
    )
    routed = RoutedLog()
    segment_log = logging.getLogger("streamtts.segment")
    segment_log.addHandler(routed)
    old_level = segment_log.level
    segment_log.setLevel(logging.INFO)
    try:
        # 1. No rule yet: status says so, and a CLI mistake is one line.
        status = _cli(kafka_settings, "status")
        assert status.returncode == 0 and "no release rule" in status.stdout, status.stderr
        wrong = _cli(kafka_settings, "set", CANDIDATE, "--percent", "150")
        assert wrong.returncode == 1 and wrong.stderr.count("\n") == 1 and "--percent" in wrong.stderr
        # 2. The candidate lane is created by `release set`; its worker joins it.
        done = _cli(kafka_settings, "set", CANDIDATE, "--percent", "10", "--min-samples", "6")
        assert done.returncode == 0, done.stderr
        assert topics.release_segments(CANDIDATE) in done.stdout
        await candidate.start()
        await stable.start()
        assert stable.releases is not None
        rule = stable.releases.current
        assert (rule.version, rule.state, rule.candidate, rule.percent) == (1, "canary", CANDIDATE, 10)
        status = _cli(kafka_settings, "status")
        assert "canary" in status.stdout and "10 % sticky" in status.stdout
        # 3. A burst: ~10 % routed to the candidate, which degrades every span it renders.
        burst = _requests(150, 0)
        pinned = _requests(3, 1000)  # the header pins a lane only where the rule allows it: not here
        ids = [r.request_id for r in burst + pinned]
        async with ResultWaiter(kafka_settings) as waiter:
            async with RequestProducer(kafka_settings) as producer:
                await producer.submit_many(burst)
                for r in pinned:
                    await producer.submit(r, headers=[(RELEASE, CANDIDATE.encode())])
            # 4. The guard rolls the candidate back on its own; the router applies it fast.
            rolled = await _until(
                lambda: stable.releases.current if stable.releases.current.state == "rolled_back" else None,
                120,
                "the automatic rollback",
                interval_s=0.01,
            )
            applied_after_s = (datetime.now(UTC) - rolled.updated_at).total_seconds()
            first = await waiter.wait(ids, timeout_s=180)
            # 5. After the rollback every new request goes to stable, its bucket notwithstanding.
            after = _requests(30, 2000)
            async with RequestProducer(kafka_settings) as producer:
                await producer.submit_many(after)
            later = await waiter.wait([r.request_id for r in after], timeout_s=120)
            # 6. A rollback strands nothing: a backlog already routed to the candidate finishes
            #    on the candidate's lane (its workers keep draining their topic).
            all_in = with_canary(stable.releases.current, CANDIDATE, percent=100)
            await write_release(kafka_settings, topics.config, all_in)
            await _until(lambda: stable.releases.current.version == all_in.version, 10, "the 100 % rule")
            backlog = _requests(40, 3000)
            async with RequestProducer(kafka_settings) as producer:
                await producer.submit_many(backlog)
            await _until(
                lambda: all(r.request_id in routed.routed for r in backlog), 30, "the backlog routed"
            )
            manual = rolled_back(stable.releases.current, reason="rollback with a backlog")
            await write_release(kafka_settings, topics.config, manual)
            drained = await waiter.wait([r.request_id for r in backlog], timeout_s=120)
    finally:
        segment_log.removeHandler(routed)
        segment_log.setLevel(old_level)
        await stable.stop()
        await candidate.stop()
        candidate_renderer.close()

    assert rolled.version == 2 and rolled.updated_by == "guard"
    assert rolled.reason and "degraded_rate" in rolled.reason, rolled.reason
    assert applied_after_s < 2.0, f"rollback applied {applied_after_s:.2f} s after it was written"
    # Routing: every request went where the rule in force when it was segmented sends it.
    rules = {1: rule, 2: rolled}
    on_candidate = {i for i, r in first.items() if r.release == CANDIDATE}
    for req in burst + pinned + after:
        release, version = routed.routed[req.request_id]
        assert version in rules
        expected = route(rules[version], req.tenant, req.request_id, None).release
        result = first.get(req.request_id) or later[req.request_id]
        assert release == expected == result.release, (req.request_id, release, expected, result.release)
    # How much of the burst the canary rule routed is a race it is meant to lose: the guard
    # rolls back once the candidate has 6 degraded results (~60 requests in), while the segment
    # stage keeps routing (52 of 150 in one run, more in others). What does not race: the rule's
    # sticky split sends ~10 % of the burst's ids to the candidate, and every request above went
    # where the rule in force sent it.
    under_canary = [r for r in burst if routed.routed[r.request_id][1] == 1]
    assert under_canary, "part of the burst was routed under the canary rule"
    share = sum(route(rule, r.tenant, r.request_id, None).release == CANDIDATE for r in burst) / len(burst)
    assert 0.05 <= share <= 0.17, f"the 10 % rule sends {share:.1%} of the burst to the candidate"
    assert all(r.release == "stable" for r in later.values())
    would_have = [r for r in after if route(rule, r.tenant, r.request_id).release == CANDIDATE]
    assert would_have, "some requests after the rollback fall in the candidate's 10 %"
    assert all(routed.routed[r.request_id] == (CANDIDATE, all_in.version) for r in backlog)
    assert all(r.release == CANDIDATE and r.status == "completed" for r in drained.values())
    after_rollback = sum(r.completed_at > manual.updated_at for r in drained.values())
    assert after_rollback > 0, "some of the backlog was still in flight when the rollback was written"
    # The candidate lane finished what it was given (nothing stranded by the rollback) and
    # its results show why it was rolled back.
    assert len(on_candidate) >= 6
    assert all(first[i].status == "completed" and first[i].degraded for i in on_candidate)
    assert not any(r.degraded for i, r in first.items() if i not in on_candidate)
    assert all(r.first_audio_ms is not None for r in first.values())
    # Nothing lost, nothing twice: one completion per request.
    every = await _all_results(kafka_settings, topics.results)
    counts: dict[str, int] = {}
    for r in every:
        counts[r.request_id] = counts.get(r.request_id, 0) + 1
    everyone = ids + list(later) + list(drained)
    assert {i: counts.get(i, 0) for i in everyone} == dict.fromkeys(everyone, 1)
    # Metrics split by release.
    text = stable.telemetry.exposition().decode()
    n_cand = len(on_candidate) + len(drained)
    n_stable = len(everyone) - n_cand
    assert metric(text, "streamtts_release_routed_total", release=CANDIDATE) == n_cand
    assert metric(text, "streamtts_release_routed_total", release="stable") == n_stable
    assert metric(text, "streamtts_release_requests_total", release=CANDIDATE, outcome="degraded") == n_cand
    assert metric(text, "streamtts_release_requests_total", release="stable", outcome="completed") == n_stable
    assert metric(text, "streamtts_release_first_audio_seconds_count", release=CANDIDATE) == n_cand
    assert metric(text, "streamtts_release_rollbacks_total", release=CANDIDATE, reason="degraded_rate") == 1
    cand_text = candidate.telemetry.exposition().decode()
    # At least once: a segment redelivered after a rebalance is rendered again (the sink
    # keeps one copy), so the candidate may count a few more segments than requests.
    assert metric(cand_text, "streamtts_release_segments_total", release=CANDIDATE, outcome="ok") == 0
    assert (
        metric(cand_text, "streamtts_release_segments_total", release=CANDIDATE, outcome="degraded") >= n_cand
    )
    assert metric(cand_text, "streamtts_release_info", release=CANDIDATE) == 1
    assert metric(text, "streamtts_release_segments_total", release=CANDIDATE) == 0
    print(
        f"\ngray release: {share:.1%} of {len(under_canary)} requests on {CANDIDATE} before the rollback; "
        f"rollback applied {applied_after_s * 1000:.0f} ms after it was written; {rolled.reason}; "
        f"{after_rollback} of {len(backlog)} backlog requests finished on {CANDIDATE} after its rollback"
    )


async def test_release_cli_promote_and_manual_rollback(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    """The rule's life cycle through the CLI alone (no workers): set, rollback, set, promote."""
    from streamtts.features.releases.watch import read_release

    assert _cli(kafka_settings, "rollback").stderr.startswith("streamtts: error: no candidate to roll back")
    assert _cli(kafka_settings, "set", "v2", "--tenants", "acme", "--header").returncode == 0
    back = _cli(kafka_settings, "rollback", "--reason", "QA found clipping")
    assert back.returncode == 0 and "finish on its lane" in back.stdout
    rule, _ = await read_release(kafka_settings, topics.config)
    assert (rule.version, rule.state, rule.reason, rule.tenants) == (
        2,
        "rolled_back",
        "QA found clipping",
        [],
    )
    assert _cli(kafka_settings, "set", "v3", "--percent", "5").returncode == 0
    assert _cli(kafka_settings, "promote").returncode == 0
    rule, _ = await read_release(kafka_settings, topics.config)
    assert (rule.version, rule.state, rule.stable, rule.candidate) == (4, "promoted", "v3", None)
    status = _cli(kafka_settings, "status", "--json")
    assert ReleaseConfig.from_obj(orjson.loads(status.stdout)).stable == "v3"
    assert _cli(kafka_settings, "set", "Bad.Name", "--percent", "1").stderr.count("\n") == 1


async def test_a_failing_candidate_canary_rolls_it_back(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    """The candidate's synthesize worker reports its canary on tts.config; the guard rolls the
    candidate back on a failure without waiting for request samples."""
    from streamtts.features.releases.auto_rollback import AutoRollback
    from streamtts.features.releases.canary_reports import CanaryReports
    from streamtts.features.releases.watch import read_release
    from streamtts.runtime.telemetry import Telemetry

    canary_rule = with_canary(ReleaseConfig.initial(), CANDIDATE, percent=10)
    await write_release(kafka_settings, topics.config, canary_rule)
    telemetry = Telemetry()
    async with (
        AutoRollback(kafka_settings, telemetry) as guard,
        CanaryReports(kafka_settings, topics.config, CANDIDATE, worker="w1") as reports,
    ):
        reports.report(True)
        await asyncio.sleep(0)  # let the send start: an ok canary must not roll back
        reports.report(False, "duration 1.20 s, expected 1.90 s")
        await _until(lambda: guard.breaches, 15, "the canary breach")
    assert [b.reason for _, b in guard.breaches] == ["canary"]
    rule, _ = await read_release(kafka_settings, topics.config)
    assert (rule.version, rule.state, rule.updated_by) == (2, "rolled_back", "guard")
    assert rule.reason and "canary" in rule.reason and "w1: duration 1.20 s" in rule.reason
    text = telemetry.exposition().decode()
    assert metric(text, "streamtts_release_rollbacks_total", release=CANDIDATE, reason="canary") == 1


async def _segments_on(
    kafka: KafkaSettings, topic: str, n: int, timeout_s: float = 30
) -> dict[str, str | None]:
    """request_id → release of the first `n` requests' segments on `topic` (read from the start)."""
    from streamtts.schemas import Segment

    consumer = make_consumer(kafka, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(await topic_partitions(kafka, topic))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        seen: dict[str, str | None] = {}
        deadline = time.monotonic() + timeout_s
        while len(seen) < n and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for r in records:
                    segment = Segment.from_bytes(r.value)
                    seen[segment.request_id] = segment.request.release
        return seen
    finally:
        await consumer.stop()


async def test_tenants_header_and_pools_route_to_the_candidate_lanes(
    kafka_settings: KafkaSettings, services: Services, topics: TopicNames, pipeline_settings: PipelineSettings
) -> None:
    """The segment stage alone: a listed tenant and the header reach the candidate, a long
    request reaches the candidate's long lane, everything else stays on stable; a malformed
    rule record is ignored (the last valid rule holds)."""
    from streamtts.features.releases.lanes import create_release_lanes as lanes

    await lanes(kafka_settings, CANDIDATE)
    rule = with_canary(ReleaseConfig.initial(), CANDIDATE, percent=0, tenants=["acme"], header=True)
    await write_release(kafka_settings, topics.config, rule)
    producer_raw = make_producer(kafka_settings)
    await producer_raw.start()
    await producer_raw.send_and_wait(topics.config, b'{"schema_version": 1, "version": 99}', key=b"release")
    await producer_raw.stop()
    segmenter = Worker(
        ["segment"],
        Settings(kafka=kafka_settings, s3=services.s3),
        pipeline_settings.replace(release_guard=False),
        ops=False,
    )
    # The candidate's workers, as far as routing sees them: members of its lane's groups (a
    # lane without any is kept off, see test_a_dead_candidate_strands_nothing).
    member = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _LANE_MEMBER,
        kafka_settings.bootstrap_servers,
        *_lane_pairs(kafka_settings, topics, CANDIDATE),
        stdout=asyncio.subprocess.PIPE,
    )
    assert member.stdout is not None
    assert (await asyncio.wait_for(member.stdout.readline(), 30)).startswith(b"joined")
    await segmenter.start()
    try:
        assert segmenter.releases is not None and segmenter.releases.current.version == rule.version
        tenant = TTSRequest.new("For acme.", language="en", voice="en_joe", tenant="acme")
        header = TTSRequest.new("Pinned by header.", language="en", voice="en_joe", tenant="globex")
        stays = TTSRequest.new("Stays on stable.", language="en", voice="en_joe", tenant="globex")
        long = TTSRequest.new(
            "A chapter. " * 40, language="en", voice="en_joe", tenant="acme", priority="batch"
        )
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit_many([tenant, stays, long])
            await producer.submit(header, headers=[(RELEASE, CANDIDATE.encode())])
        await _until(
            lambda: metric(segmenter.telemetry.exposition().decode(), "streamtts_release_routed_total") >= 4,
            30,
            "all four requests routed",
        )
        # Everything is routed by now: read each lane whole (n above what any lane should hold).
        on_candidate = await _segments_on(kafka_settings, topics.release_segments(CANDIDATE), 5, 2)
        on_candidate_long = await _segments_on(
            kafka_settings, topics.release_segments(CANDIDATE, "long"), 5, 3
        )
        on_stable = await _segments_on(kafka_settings, topics.segments, 5, 2)
        routed_text = segmenter.telemetry.exposition().decode()
    finally:
        await segmenter.stop()
        member.kill()
        await member.wait()
    assert on_candidate == {tenant.request_id: CANDIDATE, header.request_id: CANDIDATE}
    assert on_candidate_long == {long.request_id: CANDIDATE}
    assert on_stable == {stays.request_id: "stable"}
    assert metric(routed_text, "streamtts_release_routed_total", release=CANDIDATE, why="tenant") == 2
    assert metric(routed_text, "streamtts_release_routed_total", release=CANDIDATE, why="header") == 1
    assert metric(routed_text, "streamtts_release_routed_total", release="stable", why="default") == 1


async def test_release_guard_runs_on_its_own_and_serves_metrics(kafka_settings: KafkaSettings) -> None:
    """`streamtts release guard`: starts, serves /metrics with the rollback counter, stops on SIGTERM."""
    import signal
    import urllib.request

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "streamtts.cli.main",
        "release",
        "guard",
        env=cli_env(kafka_settings),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        port = None
        async with asyncio.timeout(60):
            async for line in proc.stderr:
                event = orjson.loads(line) if line.startswith(b"{") else {}
                if event.get("event") == "ops_listening":
                    port = event["port"]
                    break
        assert port
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read()
        )
        assert b"streamtts_release_rollbacks_total" in body
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 30)
    assert rc == 0


async def test_a_rule_for_a_release_without_lanes_falls_back_to_stable(
    kafka_settings: KafkaSettings, services: Services, topics: TopicNames, pipeline_settings: PipelineSettings
) -> None:
    """A rule written by hand for a release whose lane topics were never created must not
    block the segment stage (producing to a missing topic): stable serves, with an error log."""
    rule = with_canary(ReleaseConfig.initial(), "ghost", percent=0, tenants=["acme"], header=False)
    await write_release(kafka_settings, topics.config, rule)
    segmenter = Worker(
        ["segment"],
        Settings(kafka=kafka_settings, s3=services.s3),
        pipeline_settings.replace(release_guard=False),
        ops=False,
    )
    await segmenter.start()
    try:
        first = TTSRequest.new("For acme.", language="en", voice="en_joe", tenant="acme")
        second = TTSRequest.new("And again.", language="en", voice="en_joe", tenant="acme")
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit_many([first, second])
        on_stable = await _segments_on(kafka_settings, topics.segments, 2, 30)
    finally:
        await segmenter.stop()
    assert set(on_stable) == {first.request_id, second.request_id}  # the base lane, both
    assert set(on_stable.values()) <= {None, "stable"}


_LANE_MEMBER = """
import asyncio, sys
from aiokafka import AIOKafkaConsumer

async def main(bootstrap, *pairs):
    consumers = []
    for pair in pairs:
        group, topic = pair.split("=")
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, session_timeout_ms=10000)
        await c.start()
        consumers.append(c)
    while not all(c.assignment() for c in consumers):
        await asyncio.sleep(0.05)
    print("joined", flush=True)
    await asyncio.Event().wait()  # holds its groups, reads nothing, until SIGKILL

asyncio.run(main(*sys.argv[1:]))
"""
"""A candidate synthesize worker reduced to what the lane check sees: a member of the lane's
groups (a production session timeout, 10 s) that renders nothing, to be SIGKILLed."""


def _lane_pairs(kafka: KafkaSettings, topics: TopicNames, release: str) -> list[str]:
    from streamtts.features.releases.lane_health import lane_group

    return [
        f"{lane_group(kafka, release, pool)}={topics.release_segments(release, pool)}"
        for pool in ("short", "long")
    ]


async def _committed_at_end(kafka: KafkaSettings, topics: TopicNames, release: str) -> bool:
    """Whether the lane's groups have committed every record of the lane (nothing left for a
    candidate worker that comes back)."""
    from streamtts.features.releases.lane_health import LaneHealth

    health = LaneHealth(kafka, topics, ttl_s=0.0)
    try:
        return all(s.unconsumed == 0 for s in await health.states(release))
    finally:
        await health.close()


async def test_a_dead_candidate_strands_nothing(
    kafka_settings: KafkaSettings,
    services: Services,
    topics: TopicNames,
    speech_renderer,  # type: ignore[no-untyped-def]
    pipeline_settings: PipelineSettings,
) -> None:
    """A canary at 50 % whose only worker is SIGKILLed: requests routed to it while its group
    still lists the dead member are stranded; the guard sees the group empty (session timeout)
    with segments waiting, rolls back within 15 s of the first stranded request, and re-drives
    them to stable once; every request completes exactly once, and the candidate's groups have
    committed past everything (a candidate that comes back renders none of it)."""
    import signal

    from streamtts.features.releases.lanes import create_release_lanes

    dead = "crashed"
    await create_release_lanes(kafka_settings, dead)
    member = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _LANE_MEMBER,
        kafka_settings.bootstrap_servers,
        *_lane_pairs(kafka_settings, topics, dead),
        stdout=asyncio.subprocess.PIPE,
    )
    assert member.stdout is not None
    settings = Settings(kafka=kafka_settings, s3=services.s3)
    stable = Worker(
        ["segment", "synthesize", "encode", "sink"],
        settings,
        pipeline_settings.replace(render_cache=False),
        renderer=speech_renderer,
        ops=False,
    )
    routed = RoutedLog()
    routed_at: dict[str, float] = {}
    segment_log = logging.getLogger("streamtts.segment")

    class _When(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "segmented":
                routed_at[record.request_id] = record.created  # type: ignore[attr-defined]

    when = _When(logging.INFO)
    segment_log.addHandler(routed)
    segment_log.addHandler(when)
    old_level = segment_log.level
    segment_log.setLevel(logging.INFO)
    try:
        assert (await asyncio.wait_for(member.stdout.readline(), 30)).startswith(b"joined")
        canary = with_canary(ReleaseConfig.initial(), dead, percent=50)
        await write_release(kafka_settings, topics.config, canary)
        await stable.start()
        assert stable.releases is not None and stable.release_guard is not None
        await _until(lambda: stable.releases.current.version == canary.version, 10, "the canary rule")
        # 1. The candidate crashes; requests keep coming, 2 a second.
        member.send_signal(signal.SIGKILL)
        await member.wait()
        wanted = _requests(24, 5000)
        async with ResultWaiter(kafka_settings) as waiter:
            async with RequestProducer(kafka_settings) as producer:
                for request in wanted:
                    await producer.submit(request)
                    await asyncio.sleep(0.5)  # the load's pace, not synchronisation
            # 2. The guard rolls back on its own and re-drives the stranded requests.
            rolled = await _until(
                lambda: stable.releases.current if stable.releases.current.state == "rolled_back" else None,
                30,
                "the automatic rollback",
            )
            results = await waiter.wait([r.request_id for r in wanted], timeout_s=40)
        finished_s = time.time()
        guard = stable.release_guard
        await _until(lambda: guard.redriven, 10, "the re-drive")
        drained = await _committed_at_end(kafka_settings, topics, dead)
    finally:
        segment_log.removeHandler(routed)
        segment_log.removeHandler(when)
        segment_log.setLevel(old_level)
        if member.returncode is None:
            member.kill()
            await member.wait()
        await stable.stop()

    stranded = [r.request_id for r in wanted if routed.routed[r.request_id][0] == dead]
    assert stranded, "some requests were routed to the dead candidate before its group emptied"
    first_stranded = min(routed_at[i] for i in stranded)
    rollback_after_s = rolled.updated_at.timestamp() - first_stranded
    assert rolled.updated_by == "guard" and rolled.reason and "no_consumer" in rolled.reason, rolled.reason
    assert rollback_after_s < 15.0, f"rolled back {rollback_after_s:.1f} s after the first stranded request"
    # Every request completed once; the stranded ones on stable, after the re-drive.
    assert all(r.status == "completed" for r in results.values())
    assert all(results[i].release == "stable" for i in stranded)
    assert set().union(*(d.requests for d in guard.redriven)) == set(stranded)
    every = await _all_results(kafka_settings, topics.results)
    counts: dict[str, int] = {}
    for r in every:
        counts[r.request_id] = counts.get(r.request_id, 0) + 1
    assert {r.request_id: counts.get(r.request_id, 0) for r in wanted} == {r.request_id: 1 for r in wanted}
    assert drained, "the candidate's groups committed past the re-driven segments"
    text = stable.telemetry.exposition().decode()
    assert metric(text, "streamtts_release_rollbacks_total", release=dead, reason="no_consumer") == 1
    redriven_done_s = max(results[i].completed_at.timestamp() for i in stranded) - first_stranded
    print(
        f"\ndead candidate: {len(stranded)} of {len(wanted)} requests stranded; rollback "
        f"{rollback_after_s:.1f} s after the first; the stranded ones completed on stable by "
        f"{redriven_done_s:.1f} s, all {len(wanted)} by {finished_s - first_stranded:.1f} s; {rolled.reason}"
    )
