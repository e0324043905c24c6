"""The fault suite, short: steady load through SIGKILLed workers, a SIGKILLed and restarted
Kafka, a stopped MinIO and a poison burst, counted by an independent read_committed consumer
(`streamtts chaos` runs the long version). On a private stack: it kills the broker."""

from __future__ import annotations

import asyncio

import pytest

from streamtts.bench.chaos import ChaosPlan, ChaosRun
from streamtts.infra.local.stack import LocalStack
from streamtts.runtime.settings import S3Settings
from tests.services import TEST_S3_SECRET, TEST_S3_USER

pytestmark = [pytest.mark.integration, pytest.mark.model]


# Each fault once, split between the guarantees so the suite pays for each once (the long
# version, `streamtts chaos --guarantee both`, runs every fault under both): under at-least-once
# what could lose a request; under exactly-once what could also duplicate one.
SCHEDULES = {
    "at_least_once": ("kill_synthesize", "kill_front", "kill_kafka"),
    "exactly_once": ("kill_front", "kafka_during_start", "stop_minio", "poison"),
}


@pytest.mark.parametrize("guarantee", list(SCHEDULES))
async def test_fault_schedule_loses_nothing_and_flips_nothing(
    own_stack: LocalStack, guarantee: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    await asyncio.to_thread(own_stack.up, lambda _m: None)
    try:
        s3 = S3Settings(endpoint=own_stack.minio.endpoint, access_key=TEST_S3_USER, secret_key=TEST_S3_SECRET)
        plan = ChaosPlan(
            guarantee=guarantee,
            rate=2.0,
            warmup_s=4,
            # Load runs on through every restart too (a respawn takes ~12 s): 3 s after it is
            # back puts the next fault on a pipeline with requests in flight, as 5 s did.
            gap_s=3,
            kafka_down_s=2,
            minio_down_s=6,
            poison=5,
            faults=SCHEDULES[guarantee],
        )
        run = ChaosRun(own_stack, s3, plan, prefix=f"chaos-{guarantee}-", say=print, log_dir=tmp_path)
        report = await run.run()
    finally:
        await asyncio.to_thread(own_stack.down, lambda _m: None)
    print(report.row())
    assert [f.name for f in report.faults] == list(plan.faults) and report.sent >= 30
    assert not report.drain_timed_out
    assert report.lost == 0, "every acknowledged request has a result"
    assert report.flips == 0, "no completed request is later reported failed"
    assert report.completed == report.sent
    if guarantee == "exactly_once":
        assert report.duplicate_results == 0
    if "poison" in plan.faults:
        assert report.poison_dead_lettered == report.poison_sent == plan.poison
    assert report.longest_wait_after_fault_s < 30
    assert report.unplanned_restarts == 0, "no stage loop died"
