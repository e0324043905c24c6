"""Small helpers shared by the integration tests."""

from __future__ import annotations

import os

from prometheus_client.parser import text_string_to_metric_families

from streamtts.runtime.settings import KafkaSettings, S3Settings


def cli_env(kafka: KafkaSettings, s3: S3Settings | None = None, **extra: str) -> dict[str, str]:
    """Environment for a `streamtts` subprocess pointed at this test's broker, topics and S3."""
    env = dict(
        os.environ,
        STREAMTTS_KAFKA_BOOTSTRAP=kafka.bootstrap_servers,
        STREAMTTS_TOPIC_PREFIX=kafka.topic_prefix,
    )
    if s3 is not None:
        env.update(
            STREAMTTS_S3_ENDPOINT=s3.endpoint,
            STREAMTTS_S3_ACCESS_KEY=s3.access_key,
            STREAMTTS_S3_SECRET_KEY=s3.secret_key,
        )
    env.update({f"STREAMTTS_{k.upper()}": v for k, v in extra.items()})
    return env


def metric(text: str, sample: str, **labels: str) -> float:
    """Sum of the samples named `sample` (e.g. `x_total`, `x_count`) whose labels include
    `labels`, in a Prometheus text exposition; 0.0 when none."""
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    )
