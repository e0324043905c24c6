"""The production shape of Kafka, short: three KRaft brokers, topics replicated three ways with
min.insync.replicas=2, the pipeline under exactly-once, and the broker leading tts.requests
SIGKILLed mid-load and restarted. An independent read_committed subscriber must see every
request completed exactly once (`streamtts chaos --brokers 3` runs the long version).

The cluster is the test's own (ports 31092-31094, controllers 31192-31194: below the kernel's
ephemeral range, where no client connection of the session can hold them; state under
.local/test-cluster3): reused when it runs already, stopped after the session otherwise.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from streamtts.bench.broker_faults import kill_broker, leader_with_most_partitions, wait_in_sync
from streamtts.bench.result_observer import ResultObserver, sink_caught_up
from streamtts.infra.local.paths import PROJECT_ROOT, LocalPaths
from streamtts.infra.local.stack import LocalStack
from streamtts.infra.topics import apply_spec, load_spec
from streamtts.processors.synthesize.renderer import SegmentRenderer
from streamtts.runtime.kafka import make_admin, make_producer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest
from streamtts.worker import Worker
from tests.services import Services

pytestmark = [pytest.mark.integration, pytest.mark.model]

CLUSTER_PORT = int(os.environ.get("STREAMTTS_TEST_CLUSTER_PORT", "31092"))
REQUESTS = 24
RATE = 6.0
"""Requests per second: the whole load spans the kill, the outage and the restart."""
BROKER_SESSION_MS = 4000


@pytest.fixture(scope="session")
def three_brokers_booting(services: Services) -> Iterator[tuple[LocalStack, Future[None]]]:
    """The cluster, booting in a thread while the model loads (both take tens of seconds)."""
    paths = LocalPaths(
        cache_dir=LocalPaths.from_env().cache_dir,
        state_dir=Path(
            os.environ.get("STREAMTTS_TEST_CLUSTER_STATE_DIR", PROJECT_ROOT / ".local" / "test-cluster3")
        ),
    )
    settings = Settings(kafka=KafkaSettings(bootstrap_servers=f"127.0.0.1:{CLUSTER_PORT}"), s3=services.s3)
    stack = LocalStack.from_settings(settings, paths, brokers=3)
    # A short broker session: the leader SIGKILLed mid-load and restarted at once registers
    # again as soon as it boots, instead of waiting out Kafka's 9 s for its old session.
    stack = replace(
        stack,
        kafka=replace(stack.kafka, broker_session_timeout_ms=BROKER_SESSION_MS),
        extra_brokers=tuple(
            replace(node, broker_session_timeout_ms=BROKER_SESSION_MS) for node in stack.extra_brokers
        ),
    )
    already_running = all(node.pid() is not None for node in stack.brokers)
    # In a thread: `up` runs asyncio.run, which would reset this thread's pytest-asyncio loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        booted = pool.submit(_up, stack)  # object storage: the shared one
        yield stack, booted
        booted.result()
        if not already_running and not os.environ.get("STREAMTTS_TEST_KEEP_STACK"):
            pool.submit(stack.down, lambda _m: None).result()


def _up(stack: LocalStack) -> None:
    stack.up(lambda _m: None, timeout_s=120, with_minio=False)


@pytest.fixture
def three_brokers(
    three_brokers_booting: tuple[LocalStack, Future[None]], speech_renderer: SegmentRenderer
) -> LocalStack:
    stack, booted = three_brokers_booting
    booted.result()
    return stack


@pytest.fixture
async def cluster_kafka(three_brokers: LocalStack, topic_prefix: str) -> AsyncIterator[KafkaSettings]:
    kafka = KafkaSettings(bootstrap_servers=three_brokers.bootstrap, topic_prefix=topic_prefix)
    admin = make_admin(kafka)
    await admin.start()
    try:
        # `up` returns once every node answers; the cluster's metadata may still list fewer
        # brokers for a moment (one CI run chose the single-broker profile): wait until all 3.
        deadline = asyncio.get_running_loop().time() + 60
        while len((await admin.describe_cluster())["brokers"]) < 3:
            assert asyncio.get_running_loop().time() < deadline, "the cluster never listed 3 brokers"
            await asyncio.sleep(0.5)
        report = await apply_spec(admin, load_spec(prefix=topic_prefix))
        assert report.profile == "replicated", "three brokers pick the replicated profile by themselves"
        # A topic just created may be described before its partitions reach the metadata
        # (one CI run saw none): wait until they are listed, then check their replicas.
        topic = TopicNames(topic_prefix).requests
        while not (partitions := (await admin.describe_topics([topic]))[0]["partitions"]):
            assert asyncio.get_running_loop().time() < deadline, f"{topic} never listed its partitions"
            await asyncio.sleep(0.2)
        assert {len(p["replicas"]) for p in partitions} == {3}
    finally:
        await admin.close()
    yield kafka


async def test_a_killed_leader_loses_and_duplicates_nothing_under_exactly_once(
    three_brokers_booting: object,  # first: the cluster boots while the model loads
    speech_renderer: SegmentRenderer,
    three_brokers: LocalStack,
    cluster_kafka: KafkaSettings,
    services: Services,
) -> None:
    topics = TopicNames(cluster_kafka.topic_prefix)
    pipeline = PipelineSettings.of(
        synth_threads=2, session_timeout_s=6.0, storage_retries=2, processing_guarantee="exactly_once"
    )
    worker = Worker(
        ["segment", "synthesize", "encode", "sink"],
        Settings(kafka=cluster_kafka, s3=services.s3),
        pipeline,
        renderer=speech_renderer,
    )
    observer = ResultObserver(cluster_kafka, topics)
    producer = make_producer(cluster_kafka)
    await worker.start()
    await observer.start()
    await producer.start()
    sent: dict[str, float] = {}
    killed: int | None = None

    async def send(req: TTSRequest) -> None:
        # Each send on its own task: one waiting out the election does not hold up the load.
        await producer.send_and_wait(topics.requests, req.to_bytes(), key=req.request_id.encode())
        sent[req.request_id] = time.monotonic()

    sends: list[asyncio.Task[None]] = []
    try:
        for i in range(REQUESTS):
            if i == REQUESTS // 3:
                # Mid-load: the broker that leads most of tts.requests dies without a goodbye.
                killed = await leader_with_most_partitions(cluster_kafka, topics.requests)
                await kill_broker(three_brokers, killed)
                restart = asyncio.create_task(asyncio.to_thread(_up, three_brokers))
            req = TTSRequest.new(
                f"Order {i} has shipped.", request_id=f"rf3-{i:03d}", voice="en_joe", language="en"
            )
            sends.append(asyncio.create_task(send(req)))
            await asyncio.sleep(1 / RATE)  # the load's own clock
        await asyncio.gather(*sends)  # every send acknowledged (acks=all: by two brokers at least)
        await restart
        await wait_in_sync(cluster_kafka, topics)
        try:
            async with asyncio.timeout(60):
                done = False
                while not done:  # polling an independent subscriber's view: no event to await
                    done = set(sent) <= set(observer.results) and await sink_caught_up(cluster_kafka, topics)
                    if not done:
                        await asyncio.sleep(0.5)
        except TimeoutError:
            # Say which half is missing: results a read_committed reader never saw, or a sink
            # group that never committed to the end of tts.pcm.
            missing = sorted(set(sent) - set(observer.results))
            caught_up = await sink_caught_up(cluster_kafka, topics)
            raise AssertionError(
                f"60 s after the cluster healed: {len(missing)} of {len(sent)} without a result "
                f"({missing[:6]}), sink caught up: {caught_up}, killed kafka-{killed}"
            ) from None
        # One more read to the end of tts.results: a duplicate committed by now would show.
        await asyncio.wait_for(observer.read_to_end(), 30)
    finally:
        for task in sends:
            task.cancel()
        await producer.stop()
        await observer.stop()
        await worker.stop()
    assert killed is not None
    results = {key: observer.results.get(key, []) for key in sent}
    assert [k for k, seen in results.items() if not seen] == [], "lost"
    assert {k: len(seen) for k, seen in results.items() if len(seen) > 1} == {}, "duplicated"
    assert {k for k, seen in results.items() if [s for s, _ in seen] != ["completed"]} == set(), (
        "failed or flipped"
    )
    settle = max(seen[0][1] - sent[k] for k, seen in results.items())
    print(f"killed kafka-{killed}; longest settle {settle:.1f} s")
    assert settle < 60
    assert observer.dead_letters == {}
