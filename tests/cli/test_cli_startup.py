"""`streamtts run` whose brokers cannot be reached keeps retrying its start-up, then — past
STREAMTTS_STARTUP_TIMEOUT_S — exits non-zero with one clear line (no traceback), so its
supervisor restarts it. Two brokers that are not there: a closed port (refused at once) and a
black hole that accepts connections and never answers (every client call hangs)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import pytest

from streamtts.runtime.startup import StartupPolicy

BOUND_S = 4.0
STEP_S = 1.5


def _run_worker(bootstrap: str) -> tuple[subprocess.CompletedProcess[bytes], float]:
    env = {
        "PATH": "/usr/bin:/bin",
        "STREAMTTS_KAFKA_BOOTSTRAP": bootstrap,
        "STREAMTTS_STARTUP_TIMEOUT_S": str(BOUND_S),
        "STREAMTTS_STARTUP_STEP_TIMEOUT_S": str(STEP_S),
    }
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "streamtts.cli.main", "run", "--stage", "encode"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=90,
        env=env,
    )
    return proc, time.monotonic() - started


def _check_one_line(proc: subprocess.CompletedProcess[bytes], bootstrap: str) -> list[dict]:
    """Exit 1; the last line is the one error line; every other line is a JSON log event."""
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    lines = [ln for ln in proc.stderr.decode().splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr.decode()
    last = lines[-1]
    assert last.startswith("streamtts: error: worker could not "), last
    assert bootstrap in last or "STREAMTTS_STARTUP_STEP_TIMEOUT_S" in last, last
    events = [json.loads(ln) for ln in lines[:-1]]  # anything else is a log event, not a trace
    return events


async def test_a_refused_broker_is_retried_then_one_line_and_exit_1() -> None:
    bootstrap = "127.0.0.1:1"
    proc, took = await asyncio.to_thread(_run_worker, bootstrap)
    events = _check_one_line(proc, bootstrap)
    retries = [e for e in events if e["event"] == "start_retry"]
    assert len(retries) >= 3, "retried with backoff, not given up at the first refusal"
    assert all(e["step"] == "stage encode" and "KafkaConnectionError" in e["error"] for e in retries)
    assert f"within {BOUND_S:g} s" in proc.stderr.decode().splitlines()[-1]
    # It gives up when the next backoff would end past the bound: at most one backoff early.
    assert BOUND_S - StartupPolicy.max_backoff_s <= took < BOUND_S + 20, took


@pytest.fixture
async def black_hole() -> AsyncIterator[str]:
    """A listener that accepts and never answers: a broker behind a dropped return path."""
    held: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # keep the connection open; read nothing, answer nothing

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for w in held:
            w.close()
        server.close()


async def test_a_broker_that_never_answers_hits_the_step_bound_then_one_line(black_hole: str) -> None:
    proc, took = await asyncio.to_thread(_run_worker, black_hole)
    events = _check_one_line(proc, black_hole)
    retries = [e for e in events if e["event"] == "start_retry"]
    assert retries and all("did not finish within" in e["error"] for e in retries), retries
    # The bound, plus at most one step's unwind and the exit: never the clients' own 40 s.
    assert took < BOUND_S + 2 * STEP_S + 10, took
