"""A worker whose setting the real broker refuses ends at once with one line naming the setting,
instead of retrying for its whole start-up bound and asking whether Kafka is reachable (a group
session of 3 s, under the broker's 6 s minimum, did that for 120 s)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from streamtts.runtime.settings import KafkaSettings

pytestmark = pytest.mark.integration


async def test_a_session_timeout_the_broker_refuses_is_one_line_not_two_minutes_of_retries(
    kafka_settings: KafkaSettings,
) -> None:
    env = {
        **os.environ,
        "STREAMTTS_KAFKA_BOOTSTRAP": kafka_settings.bootstrap_servers,
        "STREAMTTS_TOPIC_PREFIX": kafka_settings.topic_prefix,
        "STREAMTTS_SESSION_TIMEOUT_S": "3",
        "STREAMTTS_STARTUP_TIMEOUT_S": "120",
    }

    def run() -> tuple[subprocess.CompletedProcess[bytes], float]:
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "streamtts.cli.main", "run", "--stage", "sink"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=150,
            env=env,
        )
        return proc, time.monotonic() - started

    proc, took = await asyncio.to_thread(run)
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in err, err[-2000:]
    last = [ln for ln in err.splitlines() if ln.strip()][-1]
    assert last.startswith("streamtts: error: ") and "STREAMTTS_SESSION_TIMEOUT_S=3" in last, last
    assert "reachable" not in last
    assert took < 60, f"took {took:.0f} s: retried a refusal"
