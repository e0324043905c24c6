"""`streamtts submit` end to end against the real broker: ids printed, records on the topic."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamtts.runtime.kafka import make_consumer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest
from streamtts.worker import Worker
from tests.services import Services

pytestmark = pytest.mark.integration


def _cli(kafka: KafkaSettings, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = dict(
        os.environ,
        STREAMTTS_KAFKA_BOOTSTRAP=kafka.bootstrap_servers,
        STREAMTTS_TOPIC_PREFIX=kafka.topic_prefix,
    )
    return subprocess.run(
        [sys.executable, "-m", "streamtts.cli.main", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        env=env,
    )


async def _requests_on_topic(kafka: KafkaSettings, topics: TopicNames, n: int) -> list[TTSRequest]:
    consumer = make_consumer(kafka, topics.requests, group_id=None)
    await consumer.start()
    out: list[TTSRequest] = []
    try:
        async with asyncio.timeout(30):
            while len(out) < n:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    for r in records:
                        req = TTSRequest.from_bytes(r.value)
                        assert r.key == req.request_id.encode()  # keyed by request id
                        out.append(req)
    finally:
        await consumer.stop()
    return out


async def test_submit_args_stdin_and_jsonl(
    kafka_settings: KafkaSettings, topics: TopicNames, tmp_path: Path
) -> None:
    proc = await asyncio.to_thread(
        _cli,
        kafka_settings,
        "submit",
        "--voice",
        "jm_kumo",
        "--format",
        "opus",
        "Hello there.",
        "你好。",
    )
    assert proc.returncode == 0, proc.stderr
    ids = proc.stdout.decode().split()
    assert len(ids) == 2

    proc = await asyncio.to_thread(
        _cli,
        kafka_settings,
        "submit",
        "--request-id",
        "from-stdin",
        stdin="こんにちは、世界。".encode(),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().split() == ["from-stdin"]

    jsonl = tmp_path / "batch.jsonl"
    jsonl.write_text('{"text": "one", "tenant": "acme"}\n{oops\n{"text": "three", "speed": 1.5}\n')
    proc = await asyncio.to_thread(_cli, kafka_settings, "submit", "--file", str(jsonl))
    assert proc.returncode == 1
    assert "line 2: not valid JSON" in proc.stderr.decode()
    batch_ids = proc.stdout.decode().split()
    assert len(batch_ids) == 2

    got = {r.request_id: r for r in await _requests_on_topic(kafka_settings, topics, 5)}
    assert set(got) == {*ids, "from-stdin", *batch_ids}
    assert (
        got[ids[0]].voice == "jm_kumo" and got[ids[0]].format == "opus" and got[ids[0]].text == "Hello there."
    )
    assert got[ids[1]].text == "你好。"
    assert got["from-stdin"].text == "こんにちは、世界。"
    assert got[batch_ids[0]].tenant == "acme" and got[batch_ids[1]].speed == 1.5


async def test_submit_wait_times_out_with_one_clear_line(kafka_settings: KafkaSettings) -> None:
    # No pipeline runs in this test, so no result can come: the wait must end cleanly.
    proc = await asyncio.to_thread(_cli, kafka_settings, "submit", "--wait", "--timeout", "2", "hi")
    err = proc.stderr.decode().strip()
    assert proc.returncode == 1
    assert err.startswith("streamtts: error: timed out after 2 s waiting for 1 result(s)")
    assert len(err.splitlines()) == 1


async def test_submit_wait_ends_at_once_with_the_reason_when_the_segment_stage_refuses(
    kafka_settings: KafkaSettings, services: Services, pipeline_settings: PipelineSettings
) -> None:
    # A reply topic that does not exist: the segment stage dead-letters the request and no
    # result will ever come. The wait ends on the dead letter with its reason, not a timeout.
    worker = Worker(["segment"], Settings(kafka=kafka_settings, s3=services.s3), pipeline_settings, ops=False)
    await worker.start()
    try:
        proc = await asyncio.to_thread(
            _cli,
            kafka_settings,
            "submit",
            "--wait",
            "--timeout",
            "50",
            "--reply-topic",
            f"{kafka_settings.topic_prefix}tts.reply.nobody",
            "--request-id",
            "refused-1",
            "Hello?",
        )
    finally:
        await worker.stop()
    err = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1, err
    assert not any("timed out" in line for line in err), err
    assert err[0].startswith(
        "refused-1 failed: refused by the segment stage (unknown_reply_topic): reply topic"
    )
    assert "does not exist" in err[0]
    assert err[-1] == "streamtts: error: 1 request(s) did not complete"
