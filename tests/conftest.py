"""Shared fixtures: real Kafka + real S3 for the session, isolated topics per test."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, S3Settings
from streamtts.runtime.topics import TopicNames
from tests.helpers import free_port_pair
from tests.services import Services, provide_services


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    with provide_services() as svc:
        yield svc


@pytest.fixture(scope="session")
def s3_settings(services: Services) -> S3Settings:
    return services.s3


@pytest.fixture
def topic_prefix() -> str:
    """A fresh prefix per test: tests share one broker without seeing each other's records."""
    return f"t{uuid.uuid4().hex[:10]}."


@pytest.fixture
async def kafka_settings(services: Services, topic_prefix: str) -> AsyncIterator[KafkaSettings]:
    """Kafka settings with this test's prefix, its topics created from infra/topics.yaml."""
    from streamtts.infra.topics import apply_spec, load_spec
    from streamtts.runtime.kafka import make_admin

    settings = replace(services.kafka, topic_prefix=topic_prefix)
    admin = make_admin(settings)
    await admin.start()
    try:
        await apply_spec(admin, load_spec(prefix=topic_prefix))
        yield settings
        await _delete_topics(admin, topic_prefix)
    finally:
        await admin.close()


async def _delete_topics(admin: AIOKafkaAdminClient, prefix: str) -> None:
    """Drop the test's topics: a suite run creates thousands of partitions, and a small
    broker heap that must hold all their metadata runs out (OutOfMemoryError mid-run).
    Best effort: a topic still in use by a process the test left behind is dropped later."""
    try:
        mine = [name for name in await admin.list_topics() if name.startswith(prefix)]
        if mine:
            await asyncio.wait_for(admin.delete_topics(mine), timeout=30)
    except (KafkaError, TimeoutError, OSError):
        pass


@pytest.fixture
def topics(kafka_settings: KafkaSettings) -> TopicNames:
    return TopicNames(kafka_settings.topic_prefix)


def pytest_report_header(config: pytest.Config) -> str:
    return "streamtts services: see tests/services.py for how Kafka/S3 are chosen"


@pytest.fixture(scope="session")
def registry():  # type: ignore[no-untyped-def]
    """One registry (one Kokoro and one Piper session) for every model test of the session."""
    from streamtts.processors.synthesize.registry import VoiceRegistry

    return VoiceRegistry(threads=2)


@pytest.fixture(scope="session")
def speech_renderer(registry):  # type: ignore[no-untyped-def]
    """The real model, warmed as a synthesize worker warms it, shared by pipeline tests."""
    from streamtts.processors.synthesize.renderer import SegmentRenderer
    from streamtts.processors.synthesize.speech_stack import WARM_G2P_LANGS
    from streamtts.processors.synthesize.synthesizer import Synthesizer

    registry.warm_up(("jm_kumo", "en_joe"), langs=WARM_G2P_LANGS)
    renderer = SegmentRenderer(Synthesizer(registry))
    renderer.prerender_please_wait()
    return renderer


@pytest.fixture
def pipeline_settings() -> PipelineSettings:
    from streamtts.runtime.pipeline_settings import PipelineSettings

    # Short session timeout: a killed worker's partitions move within seconds in tests.
    return PipelineSettings.of(synth_threads=2, session_timeout_s=6.0, storage_retries=2)


@pytest.fixture
async def running_pipeline(kafka_settings, services, speech_renderer, pipeline_settings):  # type: ignore[no-untyped-def]
    """All four stages in this process on this test's topics, with the shared model."""
    from streamtts.runtime.settings import Settings
    from streamtts.worker import Worker

    worker = Worker(
        ["segment", "synthesize", "encode", "sink"],
        Settings(kafka=kafka_settings, s3=services.s3),
        pipeline_settings,
        renderer=speech_renderer,
    )
    await worker.start()
    try:
        yield worker
    finally:
        await worker.stop()


@pytest.fixture
def own_stack(tmp_path):  # type: ignore[no-untyped-def]
    """A private Kafka + MinIO (not started): for tests that stop and restart them."""
    from streamtts.infra.local.kafka_server import KafkaNode
    from streamtts.infra.local.minio_server import MinioNode
    from streamtts.infra.local.paths import LocalPaths
    from streamtts.infra.local.stack import LocalStack
    from tests.services import TEST_S3_SECRET, TEST_S3_USER

    paths = LocalPaths(cache_dir=LocalPaths.from_env().cache_dir, state_dir=tmp_path / "stack")
    paths.ensure()
    kport, mport = free_port_pair(), free_port_pair()
    return LocalStack(
        # A short broker session: restarted right after its SIGKILL, the node registers again
        # at once instead of waiting out Kafka's 9 s default for its old session to lapse.
        kafka=KafkaNode(paths=paths, port=kport, controller_port=kport + 1, broker_session_timeout_ms=4000),
        minio=MinioNode(
            paths=paths,
            access_key=TEST_S3_USER,
            secret_key=TEST_S3_SECRET,
            port=mport,
            console_port=mport + 1,
        ),
    )


@pytest.fixture(scope="session")
def jaeger() -> Iterator[object]:
    """The local Jaeger (`infra up --tracing`'s), on the test stack's own ports: a real OTLP
    backend with its query API. Built from the Go module proxy on a machine without it (once;
    ~6 min on 2 cores, like MinIO), started for the session, stopped after."""
    import os
    from pathlib import Path

    from streamtts.infra.local.installer import say_stderr
    from streamtts.infra.local.jaeger_server import JaegerNode
    from streamtts.infra.local.paths import PROJECT_ROOT, LocalPaths

    paths = LocalPaths(
        cache_dir=LocalPaths.from_env().cache_dir,
        state_dir=Path(os.environ.get("STREAMTTS_TEST_STATE_DIR", PROJECT_ROOT / ".local" / "test-stack")),
    )
    paths.ensure()
    base = int(os.environ.get("STREAMTTS_TEST_JAEGER_PORT", "25318"))
    node = JaegerNode(
        paths, otlp_port=base, query_port=base + 2368, health_port=base - 1185, name="jaeger-test"
    )
    node.install(say_stderr)
    node.stop()  # one a killed session left behind
    node.start(say_stderr)
    try:
        node.wait_ready()
        yield node
    finally:
        node.stop()
