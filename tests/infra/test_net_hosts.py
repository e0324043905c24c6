"""Hosts of their own, for real: namespaces on a bridge, a link cut between one pair of hosts
and healed, and everything removed afterwards. Needs root (CI runs as root); it uses a net of
its own (10.78.0.0/24, `stst-` names), so hosts a developer has up are never touched."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from streamtts.infra.local import net_faults, net_hosts
from streamtts.infra.local.net_faults import LinkRule
from streamtts.infra.local.net_hosts import Host, HostNet
from tests.infra.net_server import hosts_with_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

NET = HostNet(subnet="10.78.0", bridge="ststbr0", ns_prefix="stst-", veth_prefix="ststv")
SERVER, CLIENT, BYSTANDER = Host("minio", NET), Host("front", NET), Host("synth1", NET)
PORT = 8765

_SERVE = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{SERVER.address}", {PORT})); s.listen(16); print("listening", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hello"); c.close()
"""


def _reach(host: Host, timeout_s: float = 1.5) -> bool:
    """Whether `host` can open a TCP connection to the server and read its greeting."""
    probe = (
        "import socket,sys\n"
        f"try:\n s=socket.create_connection(('{SERVER.address}',{PORT}),timeout={timeout_s});"
        "sys.exit(0 if s.recv(5)==b'hello' else 1)\n"
        "except OSError: sys.exit(1)\n"
    )
    return subprocess.run(host.exec_argv([sys.executable, "-c", probe]), timeout=30).returncode == 0


@pytest.fixture
def hosts() -> Iterator[None]:
    with hosts_with_server(NET, [SERVER, CLIENT, BYSTANDER], SERVER, _SERVE):
        yield


def test_each_host_has_its_own_address_and_a_cut_separates_one_pair_until_healed(hosts: None) -> None:
    assert net_hosts.namespaces(NET) == sorted(h.netns for h in (SERVER, CLIENT, BYSTANDER))
    ip = subprocess.run(
        CLIENT.exec_argv(["ip", "-4", "-o", "addr", "show", "eth0"]), capture_output=True, text=True
    )
    assert f"{CLIENT.address}/24" in ip.stdout
    assert _reach(CLIENT) and _reach(BYSTANDER)

    rule = LinkRule(CLIENT, (SERVER.address,))
    net_faults.apply("cut_test", [rule])
    assert net_faults.tables(CLIENT) == ["stts_cut_test"]
    assert not _reach(CLIENT), "the cut client still reached the server"
    assert _reach(BYSTANDER), "a cut between one pair of hosts reached a third"

    net_faults.heal("cut_test", [CLIENT])
    assert net_faults.tables(CLIENT) == []
    assert _reach(CLIENT), "the healed link stayed cut"


def test_an_asymmetric_cut_drops_one_direction_only(hosts: None) -> None:
    # The server stops hearing the client: the client's handshake never arrives.
    net_faults.apply("one_way", [LinkRule(CLIENT, (SERVER.address,), inbound=False)])
    try:
        assert not _reach(CLIENT)
        assert "chain in" not in net_faults.script(
            "one_way", [LinkRule(CLIENT, (SERVER.address,), inbound=False)]
        )
    finally:
        net_faults.heal("one_way", [CLIENT])
    assert _reach(CLIENT)


def test_remove_all_leaves_no_namespace_link_or_bridge(hosts: None) -> None:
    net_hosts.remove_all(NET)
    assert net_hosts.namespaces(NET) == []
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert NET.bridge not in links and NET.veth_prefix not in links


def test_a_lossy_rule_thins_at_random_and_a_bad_rule_is_refused() -> None:
    stmt = LinkRule(CLIENT, ("10.78.0.20",), loss_pct=5).statement("out")
    assert stmt == "ip daddr { 10.78.0.20 } numgen random mod 100 < 5 drop"
    with pytest.raises(ValueError, match="loss_pct"):
        LinkRule(CLIENT, ("10.78.0.20",), loss_pct=0)
    with pytest.raises(ValueError, match="peer"):
        LinkRule(CLIENT, ())
