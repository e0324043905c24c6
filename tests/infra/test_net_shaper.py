"""Delay on a host's links, for real: the userspace delayer in the client host's namespace, put in
the path by an nftables redirect, holds each direction of a live connection for the delay set —
also on a connection opened while the link was calm — and keeps every byte in order under
jitter. Needs root (CI runs as root); a net of its own (10.81.0.0/24, `stss-` names)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamtts.infra.local.net_hosts import Host, HostNet
from streamtts.infra.local.net_shaper import Shaper
from tests.infra.net_server import hosts_with_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

NET = HostNet(subnet="10.81.0", bridge="stssbr0", ns_prefix="stss-", veth_prefix="stssv")
SERVER, CLIENT, BYSTANDER = Host("kafka-1", NET), Host("synth1", NET), Host("synth2", NET)
PORT = 9092

_ECHO = f"""
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{SERVER.address}", {PORT})); s.listen(16); print("listening", flush=True)
def echo(c):
    while data := c.recv(65536):
        c.sendall(data)
    c.close()
while True:
    threading.Thread(target=echo, args=(s.accept()[0],), daemon=True).start()
"""

# One connection: on each stdin line, 8 one-byte round trips (prints min and median ms), or with
# "bulk", 2 MiB of random bytes echoed back whole and in order (prints ok/corrupt).
_PROBE = f"""
import os, socket, statistics, sys, time
c = socket.create_connection(("{SERVER.address}", {PORT}), timeout=30)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print("connected", flush=True)
for line in sys.stdin:
    if line.strip() == "bulk":
        data = os.urandom(2 << 20); c.sendall(data); got = bytearray()
        while len(got) < len(data):
            got += c.recv(1 << 20)
        print("ok" if bytes(got) == data else "corrupt", flush=True)
        continue
    rtts = []
    for _ in range(8):
        t = time.perf_counter(); c.sendall(b"x"); assert c.recv(1) == b"x"
        rtts.append((time.perf_counter() - t) * 1000)
    print(f"{{min(rtts):.1f}} {{statistics.median(rtts):.1f}}", flush=True)
"""


@pytest.fixture
def hosts() -> Iterator[None]:
    with hosts_with_server(NET, [SERVER, CLIENT, BYSTANDER], SERVER, _ECHO):
        yield


class Probe:
    def __init__(self, host: Host) -> None:
        self.proc = subprocess.Popen(
            host.exec_argv([sys.executable, "-c", _PROBE]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._line() == "connected"

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def ask(self, what: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        return self._line()

    def rtt_ms(self) -> tuple[float, float]:
        low, median = self.ask("rtt").split()
        return float(low), float(median)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def test_the_shaper_delays_both_directions_of_a_live_connection_until_set_calm_again(
    hosts: None, tmp_path: Path
) -> None:
    shaper = Shaper(CLIENT, (SERVER.address,), tmp_path / "synth1.sock")
    shaper.start()
    probes: list[Probe] = []
    try:
        calm = Probe(CLIENT)  # opened while calm: the delay must reach it all the same
        bystander = Probe(BYSTANDER)
        probes += [calm, bystander]
        assert calm.rtt_ms()[1] < 100, "the calm proxy alone adds a noticeable delay"

        shaper.set(150, 250)
        low, median = calm.rtt_ms()
        assert low >= 300, f"a round trip took {low} ms under 150–250 ms each way"
        assert median < 2000
        assert calm.ask("bulk") == "ok", "bytes lost or reordered under jitter"
        fresh = Probe(CLIENT)
        probes.append(fresh)
        assert fresh.rtt_ms()[0] >= 300, "a connection opened under the delay escaped it"
        assert bystander.rtt_ms()[1] < 100, "a host without a shaper was slowed"

        shaper.set(0, 0)
        assert calm.rtt_ms()[1] < 100, "the link stayed slow after the delay was lifted"
    finally:
        for probe in probes:
            probe.close()
        shaper.stop()
    direct = Probe(CLIENT)
    try:
        assert direct.ask("bulk") == "ok", "after stop the link is broken"
    finally:
        direct.close()
