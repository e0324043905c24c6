"""The bench says when its local broker was still warming up (a cold JVM's JIT costs the
pipeline's first minutes: docs/performance.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from streamtts.bench.bench_facts import WARM_BROKER_S, broker_note
from streamtts.bench.worker_procs import process_age_s


def test_a_process_age_is_read_from_proc() -> None:
    before = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        young = process_age_s(child.pid)
        since_spawn = time.monotonic() - before
        mine = process_age_s(os.getpid())
        assert young is not None and mine is not None
        # No older than the time since it was spawned (0.02 s: /proc's tick and uptime rounding).
        assert 0.0 <= young <= since_spawn + 0.02
        assert mine >= young  # this test process started before its child
    finally:
        child.kill()
        child.wait()
    assert process_age_s(child.pid) is None  # gone


def test_the_report_warns_of_a_broker_still_warming_up() -> None:
    assert broker_note(None) == ""
    cold = broker_note(60.0)
    assert cold.startswith("Local Kafka up 1.0 min at the start") and "still warming up" in cold
    warm = broker_note(WARM_BROKER_S + 60)
    assert warm == "Local Kafka up 4.0 min at the start."
