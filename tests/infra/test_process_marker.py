"""A local service is recognised as ours by a path of this clone's state dir in its cmdline,
also when the state dir is reached through a symlink (a bench run from an exported copy)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamtts.infra.local.processes import running_pid


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A process whose cmdline names `real/config`, and its pid file."""
    real = tmp_path / "real"
    real.mkdir()
    config = real / "config"
    config.write_text("")
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    # Its cmdline is its own only once it has exec'd (before, /proc shows the forking parent's,
    # which a loaded CI machine caught): it says so when it runs.
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    pid_file = tmp_path / "service.pid"
    pid_file.write_text(str(proc.pid))
    try:
        yield config, pid_file
    finally:
        proc.kill()
        proc.wait()


def test_the_marker_as_given_or_through_a_symlink_finds_the_process(
    service: tuple[Path, Path], tmp_path: Path
) -> None:
    config, pid_file = service
    linked = tmp_path / "copy"
    linked.symlink_to(config.parent)
    pid = int(pid_file.read_text())
    assert running_pid(pid_file, str(config)) == pid
    assert running_pid(pid_file, str(linked / "config")) == pid


def test_another_clones_marker_does_not(service: tuple[Path, Path], tmp_path: Path) -> None:
    _, pid_file = service
    other = tmp_path / "other"
    other.mkdir()
    assert running_pid(pid_file, str(other / "config")) is None
