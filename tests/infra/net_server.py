"""Hosts of a test net of their own, one of them running a small TCP server, removed after."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from streamtts.infra.local import net_hosts
from streamtts.infra.local.net_hosts import Host, HostNet


@contextmanager
def hosts_with_server(net: HostNet, hosts: Sequence[Host], server: Host, code: str) -> Iterator[None]:
    """`hosts` made on `net` (a crashed run's leftovers removed first); `code` runs on `server`
    and prints `listening` once it accepts. Everything goes afterwards."""
    net_hosts.remove_all(net)
    net_hosts.create(hosts)
    proc = subprocess.Popen(server.exec_argv([sys.executable, "-c", code]), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
        yield
    finally:
        proc.kill()
        proc.wait()
        net_hosts.remove_all(net)
