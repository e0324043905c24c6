"""Topics as code against the real broker: create, idempotent re-apply, drift repair/report."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka.admin import NewTopic

from streamtts.infra.topics import apply_spec, load_spec
from streamtts.runtime.kafka import make_admin
from tests.services import Services

pytestmark = pytest.mark.integration


async def test_apply_creates_then_is_idempotent_then_repairs_and_reports_drift(
    services: Services,
) -> None:
    prefix = f"d{uuid.uuid4().hex[:8]}."
    specs = load_spec(prefix=prefix)
    admin = make_admin(services.kafka)
    await admin.start()
    try:
        first = await apply_spec(admin, specs)
        assert sorted(first.created) == sorted(s.name for s in specs)
        second = await apply_spec(admin, specs)
        assert second.created == [] and second.configs_altered == [] and second.drift == []
        assert sorted(second.unchanged) == sorted(s.name for s in specs)

        # Drift: a config changed by hand is put back; too many partitions is reported.
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        await admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    f"{prefix}tts.results",
                    configs={"retention.ms": "1000"},
                )
            ]
        )
        # Config changes reach the broker's cache asynchronously: await the visible change.
        await _await_config(admin, f"{prefix}tts.results", "retention.ms", "1000")
        resp = await admin.create_topics([NewTopic(f"{prefix}tts.extra", 4, 1)])
        assert resp.topic_errors[0][1] == 0
        spec_names = {s.name for s in specs}
        third = await apply_spec(admin, specs)
        assert any(
            line.startswith(f"{prefix}tts.results (") and "retention.ms=604800000" in line
            for line in third.configs_altered
        )
        await _await_config(admin, f"{prefix}tts.results", "retention.ms", "604800000")
        fourth = await apply_spec(admin, specs)
        assert fourth.configs_altered == []
        assert f"{prefix}tts.extra" not in spec_names  # topics outside the spec are left alone

        # A spec asking for fewer partitions than exist cannot be applied: reported as drift.
        shrunk = [
            s if s.name != f"{prefix}tts.requests" else type(s)(s.name, 2, s.replication_factor, s.configs)
            for s in specs
        ]
        fifth = await apply_spec(admin, shrunk)
        assert fifth.drift == [f"{prefix}tts.requests: has 6 partitions, spec says 2 (cannot shrink)"]
        # ... and growing is applied.
        grown = [
            s if s.name != f"{prefix}tts.results" else type(s)(s.name, 5, s.replication_factor, s.configs)
            for s in specs
        ]
        sixth = await apply_spec(admin, grown)
        assert sixth.partitions_grown == [f"{prefix}tts.results"]
        described = await admin.describe_topics([f"{prefix}tts.results"])
        assert len(described[0]["partitions"]) == 5
    finally:
        await admin.close()


async def _await_config(admin, topic: str, key: str, value: str, timeout_s: float = 15) -> None:  # type: ignore[no-untyped-def]
    from streamtts.infra.topics import _topic_configs

    async with asyncio.timeout(timeout_s):
        while (await _topic_configs(admin, [topic]))[topic].get(key) != value:  # noqa: ASYNC110
            await asyncio.sleep(0.1)  # polling the broker: there is no config-change event


def test_spec_errors_name_the_topic(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from streamtts.errors import ConfigError

    bad = tmp_path / "t.yaml"
    bad.write_text("topics:\n  tts.a: {partitions: 0}\n")
    with pytest.raises(ConfigError, match=r"'tts\.a' needs 'partitions'"):
        load_spec(bad)
    bad.write_text("topics:\n  tts.a: {partitions: 1, retention: 5}\n")
    with pytest.raises(ConfigError, match="unknown key 'retention'"):
        load_spec(bad)
