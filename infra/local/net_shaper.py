"""A host's links to some peers made slow: the userspace delayer (`net_delay.py`) started in the
host's namespace, an nftables redirect that puts it in the path, and its delay changed at will.

A run starts a shaper for a host before the host's process opens its connections (a redirect
catches only new ones) and leaves it at 0 ms; a nemesis sets 100–300 ms and its heal sets 0
again. The redirect lives in an nftables table of its own (`ip stts_shaper`), apart from the
fault tables, and goes with `stop` (or with the namespace).
"""

from __future__ import annotations

import selectors
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from streamtts.errors import InfraError
from streamtts.infra.local.net_delay import MARK
from streamtts.infra.local.net_faults import nft_in
from streamtts.infra.local.net_hosts import Host

_TABLE = "stts_shaper"
PROXY_PORT = 15717


def redirect_script(peers: tuple[str, ...], port: int) -> str:
    """Every TCP connection to `peers` goes to the proxy on the host's loopback, except the
    proxy's own (marked) connections onward."""
    return (
        f"table ip {_TABLE} {{\n"
        "  chain out {\n"
        "    type nat hook output priority -100; policy accept;\n"
        f"    meta mark {MARK:#x} return;\n"
        f"    ip daddr {{ {', '.join(peers)} }} ip protocol tcp redirect to :{port};\n"
        "  }\n"
        "}\n"
    )


@dataclass
class Shaper:
    host: Host
    peers: tuple[str, ...]
    control: Path
    """The proxy's Unix control socket (a path: every namespace sees the same file system)."""
    port: int = PROXY_PORT
    _proc: subprocess.Popen[str] | None = field(default=None, repr=False)

    @property
    def log(self) -> Path:
        """The proxy's stderr (a file, so a chatty proxy never blocks on a full pipe)."""
        return self.control.with_suffix(".log")

    def start(self, timeout_s: float = 15.0) -> None:
        """Start the proxy, wait for its `ready`, then put it in the path (0 ms until `set`)."""
        self.control.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "streamtts.infra.local.net_delay"]
        argv += ["--port", str(self.port), "--control", str(self.control)]
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(
                self.host.exec_argv(argv), stdout=subprocess.PIPE, stderr=log, text=True
            )
        line = _first_line(self._proc, timeout_s)
        if line.strip() != "ready":
            self.stop()
            why = line.strip() or self.log.read_text(errors="replace").strip()[-300:] or "no output"
            raise InfraError(f"the delay proxy in {self.host.netns} did not start: {why}")
        nft_in(self.host, redirect_script(self.peers, self.port))

    def set(self, low_ms: float, high_ms: float) -> None:
        """Every read from now on is held `low_ms`..`high_ms` (uniform) per direction."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as ctl:
            ctl.settimeout(5.0)
            ctl.connect(str(self.control))
            ctl.sendall(orjson.dumps({"low_ms": low_ms, "high_ms": high_ms}) + b"\n")
            answer = ctl.makefile("rb").readline().decode().strip()
        if answer != "ok":
            raise InfraError(f"the delay proxy in {self.host.netns} refused the delay: {answer}")

    def stop(self) -> None:
        nft_in(self.host, f"delete table ip {_TABLE}\n", check=False)
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        if self._proc is not None and self._proc.stdout is not None:
            self._proc.stdout.close()
        self._proc = None
        self.control.unlink(missing_ok=True)


def _first_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The proxy's first stdout line; empty if it exited or said nothing within the bound."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            return ""
    return proc.stdout.readline()
