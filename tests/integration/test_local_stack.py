"""`streamtts infra up/status/down` as a user runs it: idempotent, fast when installed, clean."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamtts.infra.local.processes import read_cmdline
from tests.helpers import free_port_pair

pytestmark = pytest.mark.integration


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamtts.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )


def test_up_is_idempotent_and_down_leaves_no_process(tmp_path: Path) -> None:
    kport, mport = free_port_pair(), free_port_pair()
    env = dict(
        os.environ,
        STREAMTTS_STATE_DIR=str(tmp_path / "state"),
        STREAMTTS_KAFKA_BOOTSTRAP=f"127.0.0.1:{kport}",
        STREAMTTS_S3_ENDPOINT=f"127.0.0.1:{mport}",
    )
    started = time.monotonic()
    up = _cli(env, "infra", "up")
    assert up.returncode == 0, up.stderr
    assert time.monotonic() - started < 60  # installed already by the session fixture: just start
    pids = [int(p.split("=")[1]) for p in up.stdout.split() if p.startswith("pid=")]
    assert len(pids) == 2 and all(read_cmdline(p) for p in pids)
    again = _cli(env, "infra", "up")
    assert again.returncode == 0
    assert [int(p.split("=")[1]) for p in again.stdout.split() if p.startswith("pid=")] == pids
    status = _cli(env, "infra", "status")
    assert status.returncode == 0 and status.stdout.count("ready") == 2

    # Port taken by someone else → one clear line.
    other = dict(env, STREAMTTS_STATE_DIR=str(tmp_path / "other"))
    clash = _cli(other, "infra", "up")
    assert clash.returncode == 1
    assert f"port {kport} (kafka) is already in use" in clash.stderr
    assert "Traceback" not in clash.stderr

    down = _cli(env, "infra", "down")
    assert down.returncode == 0
    assert not any(read_cmdline(p) for p in pids), "down must leave no process behind"
    status = _cli(env, "infra", "status")
    assert status.returncode == 3 and "stopped" in status.stdout
