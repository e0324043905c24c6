"""Start, find and stop the background processes of the local stack, via pid files.

Only processes whose pid file we wrote *and* whose command line still carries our marker are
ever signalled, so `infra down` never kills an unrelated process that reused a pid.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from streamtts.errors import InfraError
from streamtts.infra.local.installer import require_tool
from streamtts.infra.local.paths import LocalPaths


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


def http_ok(url: str, timeout_s: float = 2.0) -> bool:
    """A readiness probe: `url` answers 200 (False while it refuses, fails or times out)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.status == 200
    except OSError:
        return False


def require_free_ports(host: str, ports: Iterable[int], remedy: str, *, owner: str = "") -> None:
    """Before a service starts: InfraError for the first of `ports` another process already
    listens on at `host` ("port P (owner) is already in use by another process; remedy")."""
    for port in ports:
        if port_in_use(host, port):
            named = f" ({owner})" if owner else ""
            raise InfraError(f"port {port}{named} is already in use by another process; {remedy}")


def read_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def running_pid(pid_file: Path, marker: str) -> int | None:
    """The pid recorded in `pid_file` if that process is alive and is ours (cmdline has marker:
    a path of this clone's state dir, as given or resolved — a state dir reached through a
    symlink, e.g. a bench run from an exported copy, names the real path in the cmdline)."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    if not is_running(pid):
        return None
    cmdline = read_cmdline(pid)
    if marker not in cmdline and os.path.realpath(marker) not in cmdline:
        return None
    return pid


def spawn(
    argv: Sequence[str],
    *,
    pid_file: Path,
    log_file: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start `argv` detached (own session, so our Ctrl-C does not kill it) and record its pid."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    pid_file.write_text(str(proc.pid))
    return proc.pid


def stop(pid_file: Path, marker: str, *, grace_s: float = 30.0) -> bool:
    """SIGTERM our process (and its group), wait up to `grace_s`, then SIGKILL. True if it ran."""
    pid = running_pid(pid_file, marker)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not is_running(pid):
            break
        time.sleep(0.1)
    else:
        _signal_group(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while is_running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if is_running(pid):
            raise InfraError(f"process {pid} ({pid_file.stem}) did not exit after SIGKILL")
    pid_file.unlink(missing_ok=True)
    return True


def is_running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (our exited children are reaped here)."""
    # A zombie child of ours still answers kill(0); reap it if it is our child.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def rss_kib(pid: int) -> int | None:
    """Resident set size of `pid` in KiB (from /proc), for status output."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class LocalProcess:
    """A service of the local stack run as a background process of its own (a node
    dataclass mixes it in): found by its pid file and the marker on its command line,
    stopped, and waited for at start-up."""

    paths: LocalPaths
    name: str
    """Its pid, log and state names."""
    title: str
    """Its name in messages ("MinIO")."""

    @property
    def marker(self) -> str:
        """What its command line carries that names this clone's state (see `running_pid`)."""
        raise NotImplementedError

    @property
    def pid_file(self) -> Path:
        return self.paths.pid_file(self.name)

    @property
    def log_file(self) -> Path:
        return self.paths.log_file(self.name)

    def pid(self) -> int | None:
        return running_pid(self.pid_file, self.marker)

    def stop(self) -> bool:
        return stop(self.pid_file, self.marker)

    def ready(self) -> bool:
        raise NotImplementedError

    def _spawn(self, argv: Sequence[str], *, netns: str = "", env: Mapping[str, str] | None = None) -> int:
        """Start `argv` detached under its own pid and log files; with `netns`, inside that
        network namespace (`ip netns exec` execs it, so the pid stays the program's)."""
        if netns:
            argv = ["ip", "netns", "exec", netns, *argv]
        return spawn(argv, pid_file=self.pid_file, log_file=self.log_file, env=env)

    def _wait_ready(self, timeout_s: float, poll_s: float) -> None:
        """Poll `ready` every `poll_s` until it holds; InfraError once the process is gone or
        after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        gone = 0
        while not self.ready():
            # Gone on three polls in a row, not one: just after the fork, until it execs, the
            # child's command line is still ours and does not name its marker; and a suite run
            # once saw MinIO "exit" right after it logged its API address, with nothing in its log.
            gone = gone + 1 if self.pid() is None else 0
            if gone >= 3:
                raise InfraError(f"{self.title} exited during start-up (log: {self.log_file})")
            if time.monotonic() > deadline:
                raise InfraError(f"{self.title} not ready after {timeout_s:.0f} s")
            time.sleep(poll_s)  # polling a remote health check


class GoBuiltProcess(LocalProcess):
    """A local service whose binary is built from the Go module proxy once per machine."""

    executable: ClassVar[str]
    """The built binary's file name (in `bin_dir`)."""

    @property
    def bin_dir(self) -> Path:
        """Where this version's build lives (once per machine)."""
        raise NotImplementedError

    @property
    def binary(self) -> Path:
        return self.bin_dir / self.executable

    def installed(self) -> bool:
        return self.binary.exists() and os.access(self.binary, os.X_OK)

    def _go(self) -> str:
        """The Go toolchain that builds it."""
        return require_tool("go", f"install Go ≥ 1.24 to build {self.title} from the Go module proxy")
