"""Hosts of their own on one machine: a network namespace per process, on one bridge.

`streamtts infra up --hosts` (and the network-fault tests) put each broker, MinIO, each worker
and the gateway in a namespace of its own (`stts-<name>`), joined by a veth pair to the bridge
`sttsbr0` in the machine's own namespace, which holds the first address of the subnet. Every
host then has its own address, its own loopback and its own firewall, so the network between
two processes can be cut or made lossy (`net_faults.py`) without touching any other pair.

The machine's own namespace is one more host on the bridge (10.77.0.1): the fault tools and the
independent checker run there, as a client outside the cluster would.

Needs root and iproute2 (`ip`); every command's failure is an `InfraError` naming it. Names are
prefixed, so `remove_all` can clean a crashed run's leftovers without knowing what it made.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from streamtts.errors import InfraError

SUBNET = "10.77.0"
PREFIX_LEN = 24
CHECKER_ADDRESS = f"{SUBNET}.1"
"""The machine's own namespace, on the bridge: where faults are driven and results checked."""


@dataclass(frozen=True)
class HostNet:
    """One set of hosts: its subnet, bridge and name prefixes. The product's is `LOCAL_NET`; a
    test makes its own, so it never touches hosts a developer has up."""

    subnet: str = SUBNET
    bridge: str = "sttsbr0"
    ns_prefix: str = "stts-"
    veth_prefix: str = "sttsv"

    @property
    def gateway(self) -> str:
        return f"{self.subnet}.1"


LOCAL_NET = HostNet()

ADDRESSES: dict[str, int] = {
    "kafka-1": 11,
    "kafka-2": 12,
    "kafka-3": 13,
    "minio": 20,
    "front": 31,
    "front2": 32,
    "synth1": 41,
    "synth2": 42,
    "gateway": 50,
}
"""Every host the layout knows, by name → last octet of its address. Fixed, so an address in a
log or a fault history says which process it was."""


@dataclass(frozen=True)
class Host:
    name: str
    net: HostNet = LOCAL_NET

    @property
    def address(self) -> str:
        try:
            return f"{self.net.subnet}.{ADDRESSES[self.name]}"
        except KeyError:
            raise InfraError(f"no host named {self.name!r}; hosts are {', '.join(ADDRESSES)}") from None

    @property
    def netns(self) -> str:
        return f"{self.net.ns_prefix}{self.name}"

    @property
    def veth(self) -> str:
        """The bridge side of the host's veth pair (≤ 15 characters, the kernel's limit)."""
        return f"{self.net.veth_prefix}{ADDRESSES[self.name]}"

    def exec_argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside this host: `ip netns exec` execs it, so the pid is the program's."""
        return [_ip(), "netns", "exec", self.netns, *argv]


def _ip() -> str:
    found = shutil.which("ip")
    if found is None:
        raise InfraError("hosts need iproute2's `ip` (apt-get install iproute2)")
    return found


def require_root() -> None:
    if os.geteuid() != 0:
        raise InfraError("hosts of their own need root (network namespaces, veth pairs and a bridge)")


def run_ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([_ip(), *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise InfraError(f"`ip {' '.join(args)}` failed: {done.stderr.strip() or done.returncode}")
    return done


def namespaces(net: HostNet = LOCAL_NET) -> list[str]:
    """The namespaces this layout made (ours by prefix), present now."""
    out = run_ip("netns", "list", check=False).stdout
    return sorted(n for line in out.splitlines() if (n := line.split(" ")[0]).startswith(net.ns_prefix))


def _link_exists(name: str) -> bool:
    return run_ip("link", "show", name, check=False).returncode == 0


def ensure_bridge(net: HostNet = LOCAL_NET) -> None:
    require_root()
    if not _link_exists(net.bridge):
        run_ip("link", "add", net.bridge, "type", "bridge")
        run_ip("addr", "add", f"{net.gateway}/{PREFIX_LEN}", "dev", net.bridge)
    run_ip("link", "set", net.bridge, "up")


def create(hosts: Iterable[Host]) -> list[Host]:
    """Make every host that is not there yet (namespace, veth pair on the bridge, address,
    loopback up). Idempotent; returns the hosts."""
    made = []
    present: dict[HostNet, set[str]] = {}
    for host in hosts:
        if host.net not in present:
            ensure_bridge(host.net)
            present[host.net] = set(namespaces(host.net))
        _ = host.address  # an unknown name fails before anything is made for it
        if host.netns not in present[host.net]:
            if _link_exists(host.veth):  # a crashed run's half-made host
                run_ip("link", "del", host.veth)
            run_ip("netns", "add", host.netns)
            run_ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
            run_ip("link", "set", host.veth, "master", host.net.bridge, "up")
            run_ip("-n", host.netns, "addr", "add", f"{host.address}/{PREFIX_LEN}", "dev", "eth0")
            run_ip("-n", host.netns, "link", "set", "eth0", "up")
            run_ip("-n", host.netns, "link", "set", "lo", "up")
        made.append(host)
    return made


def remove_all(net: HostNet = LOCAL_NET) -> list[str]:
    """Delete every namespace, veth and the bridge of `net` (also a crashed run's). Processes
    still inside a namespace keep it alive: stop them first. Returns what went."""
    gone = []
    for ns in namespaces(net):
        run_ip("netns", "del", ns, check=False)
        gone.append(ns)
    links = run_ip("-o", "link", "show", check=False).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(net.veth_prefix):
            run_ip("link", "del", name, check=False)
            gone.append(name)
    if _link_exists(net.bridge):
        run_ip("link", "del", net.bridge, check=False)
        gone.append(net.bridge)
    return gone


def host_of_address(address: str) -> str | None:
    """The host name an address belongs to (for fault histories and logs)."""
    last = address.rsplit(".", 1)[-1]
    return next((name for name, octet in ADDRESSES.items() if str(octet) == last), None)
