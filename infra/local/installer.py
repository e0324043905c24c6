"""Run a long install step (Maven resolve, Go build) with visible progress and a clear failure."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from streamtts.errors import InfraError

Say = Callable[[str], None]


def say_stderr(message: str) -> None:
    print(f"[infra] {message}", file=sys.stderr, flush=True)


def require_tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise InfraError(f"{name} not found on PATH: {hint}")
    return path


def run_step(
    argv: Sequence[str],
    *,
    what: str,
    log_file: Path,
    say: Say,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 3600,
    heartbeat_s: float = 15,
) -> None:
    """Run `argv` to completion, logging to `log_file` and saying "still <what>" periodically.

    Raises InfraError naming the step and the log file when it fails or times out.
    """
    log_file.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env else None,
            cwd=cwd,
        )
        next_beat = started + heartbeat_s
        while True:
            try:
                rc = proc.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                if now - started > timeout_s:
                    proc.kill()
                    raise InfraError(f"{what} timed out after {timeout_s:.0f} s (log: {log_file})") from None
                if now >= next_beat:
                    say(f"… still {what} ({now - started:.0f} s)")
                    next_beat = now + heartbeat_s
    if rc != 0:
        tail = _tail(log_file)
        raise InfraError(f"{what} failed with exit code {rc}: {tail} (log: {log_file})")
    say(f"{what}: done in {time.monotonic() - started:.0f} s")


def _tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""
