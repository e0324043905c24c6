"""Which Kafka and S3 the tests talk to — one place decides, in this order:

1. `STREAMTTS_KAFKA_BOOTSTRAP` / `STREAMTTS_S3_ENDPOINT` set → use those existing services.
2. A Docker engine answers → `testcontainers` starts Apache Kafka and MinIO containers.
3. Otherwise → the project's own local stack (Kafka from Maven Central, MinIO built with Go)
   on test ports with its own state dir; installed if missing, stopped after the session if
   this session started it.

All three are real brokers/servers reached over sockets; none is a mock.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from streamtts.runtime.settings import KafkaSettings, S3Settings

TEST_KAFKA_PORT = int(os.environ.get("STREAMTTS_TEST_KAFKA_PORT", "19092"))
TEST_MINIO_PORT = int(os.environ.get("STREAMTTS_TEST_MINIO_PORT", "19000"))
TEST_S3_USER = "streamtts-test"
TEST_S3_SECRET = "streamtts-test-secret"


@dataclass(frozen=True)
class Services:
    kafka: KafkaSettings
    s3: S3Settings
    source: str
    """"env", "testcontainers" or "local-stack": shown in the pytest header."""


def _docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:  # no engine, no socket, no permission: all mean "not available"
        return False


@contextmanager
def provide_services() -> Iterator[Services]:
    kafka_env = os.environ.get("STREAMTTS_KAFKA_BOOTSTRAP")
    s3_env = os.environ.get("STREAMTTS_S3_ENDPOINT")
    if kafka_env and s3_env:
        from streamtts.runtime.settings import Settings

        settings = Settings.from_env()
        yield Services(settings.kafka, settings.s3, "env")
    elif _docker_available():
        with _testcontainers() as services:
            yield services
    else:
        with _local_stack() as services:
            yield services


@contextmanager
def _testcontainers() -> Iterator[Services]:
    from testcontainers.kafka import KafkaContainer
    from testcontainers.minio import MinioContainer

    with (
        KafkaContainer("apache/kafka:4.1.1").with_kraft() as kafka,
        MinioContainer(access_key=TEST_S3_USER, secret_key=TEST_S3_SECRET) as minio,
    ):
        cfg = minio.get_config()
        yield Services(
            KafkaSettings(bootstrap_servers=kafka.get_bootstrap_server()),
            S3Settings(endpoint=cfg["endpoint"], access_key=TEST_S3_USER, secret_key=TEST_S3_SECRET),
            "testcontainers",
        )


@contextmanager
def _local_stack() -> Iterator[Services]:
    from streamtts.infra.local.paths import PROJECT_ROOT, LocalPaths
    from streamtts.infra.local.stack import LocalStack
    from streamtts.runtime.settings import Settings

    kafka = KafkaSettings(bootstrap_servers=f"127.0.0.1:{TEST_KAFKA_PORT}")
    s3 = S3Settings(
        endpoint=f"127.0.0.1:{TEST_MINIO_PORT}", access_key=TEST_S3_USER, secret_key=TEST_S3_SECRET
    )
    paths = LocalPaths(
        cache_dir=LocalPaths.from_env().cache_dir,
        state_dir=Path(os.environ.get("STREAMTTS_TEST_STATE_DIR", PROJECT_ROOT / ".local" / "test-stack")),
    )
    stack = LocalStack.from_settings(Settings(kafka=kafka, s3=s3), paths)
    already_running = stack.kafka.pid() is not None and stack.minio.pid() is not None
    if stack.kafka.pid() is None:
        # The test broker holds only throwaway per-test topics (a fresh prefix each): start it
        # empty. Kept across sessions they pile up (~10k partitions a suite run) until the
        # broker's small heap cannot load its metadata and it dies at start-up.
        shutil.rmtree(stack.kafka.data_dir, ignore_errors=True)
    # In a thread: `up` uses asyncio.run for its readiness checks, which would reset the main
    # thread's current event loop under pytest-asyncio's session loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(stack.up, timeout_s=120).result()
    try:
        yield Services(kafka, s3, "local-stack")
    finally:
        if not already_running and not os.environ.get("STREAMTTS_TEST_KEEP_STACK"):
            stack.down(say=lambda _msg: None)
