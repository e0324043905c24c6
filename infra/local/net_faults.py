"""Links between hosts cut or thinned, and healed: nftables rules inside a host's namespace.

A fault is a named set of rules, each on one host: drop what it sends to some peers, what it
hears from them, or a random share of both (loss). Each fault lives in an nftables table of its
own (`inet stts_<fault>`) in every host it touches, so faults compose and overlap, and healing
one deletes exactly its tables and nothing of another.

Partition rules drop silently, as a cut cable or a dead switch port does: a client sees
timeouts, never a quick "unreachable". Delay is no kernel rule here: this machine's kernel
is built without netem (CONFIG_NET_SCH_NETEM is not set) and no other qdisc holds packets
back; `net_shaper.py` delays a host's links in userspace instead.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from streamtts.errors import InfraError
from streamtts.infra.local.net_hosts import Host

_FAULT_ID = re.compile(r"^[a-z0-9_]{1,40}$")


@dataclass(frozen=True)
class LinkRule:
    """On `host`: drop traffic to (`outbound`) and from (`inbound`) the `peers` addresses;
    `loss_pct` < 100 drops that share of the packets at random instead of all."""

    host: Host
    peers: tuple[str, ...]
    outbound: bool = True
    inbound: bool = True
    loss_pct: int = 100

    def __post_init__(self) -> None:
        if not self.peers:
            raise ValueError("a link rule needs at least one peer address")
        if not 1 <= self.loss_pct <= 100:
            raise ValueError(f"loss_pct must be 1..100, not {self.loss_pct}")
        if not (self.outbound or self.inbound):
            raise ValueError("a link rule drops outbound, inbound or both")

    def statement(self, direction: str) -> str:
        peers = ", ".join(self.peers)
        field = "daddr" if direction == "out" else "saddr"
        thin = f" numgen random mod 100 < {self.loss_pct}" if self.loss_pct < 100 else ""
        return f"ip {field} {{ {peers} }}{thin} drop"


def _nft() -> str:
    found = shutil.which("nft")
    if found is None:
        raise InfraError("network faults need nftables' `nft` (apt-get install nftables)")
    return found


def _table(fault_id: str) -> str:
    if not _FAULT_ID.match(fault_id):
        raise ValueError(f"fault id {fault_id!r}: lowercase letters, digits and _ only")
    return f"stts_{fault_id}"


def nft_in(host: Host, script: str, *, check: bool = True) -> None:
    """Run an nftables script inside `host`'s namespace."""
    done = subprocess.run(
        host.exec_argv([_nft(), "-f", "-"]), input=script, capture_output=True, text=True, timeout=15
    )
    if check and done.returncode != 0:
        raise InfraError(f"nft in {host.netns} failed: {done.stderr.strip() or done.returncode}")


def script(fault_id: str, rules: Iterable[LinkRule]) -> str:
    """The nftables script for one host's share of a fault."""
    rules = list(rules)
    outs = [r.statement("out") for r in rules if r.outbound]
    ins = [r.statement("in") for r in rules if r.inbound]
    lines = [f"table inet {_table(fault_id)} {{"]
    if outs:
        lines += ["  chain out {", "    type filter hook output priority 0; policy accept;"]
        lines += [f"    {s};" for s in outs] + ["  }"]
    if ins:
        lines += ["  chain in {", "    type filter hook input priority 0; policy accept;"]
        lines += [f"    {s};" for s in ins] + ["  }"]
    return "\n".join([*lines, "}"]) + "\n"


def apply(fault_id: str, rules: Iterable[LinkRule]) -> None:
    """Start the fault: every rule in force on its host at once (one script per host)."""
    by_host: dict[Host, list[LinkRule]] = {}
    for rule in rules:
        by_host.setdefault(rule.host, []).append(rule)
    for host, host_rules in by_host.items():
        nft_in(host, script(fault_id, host_rules))


def heal(fault_id: str, hosts: Iterable[Host]) -> None:
    """End the fault: its tables go from every host it touched (absent ones are fine)."""
    for host in set(hosts):
        nft_in(host, f"destroy table inet {_table(fault_id)}\n", check=False)
        # `destroy` needs nft ≥ 1.0.8; older ones only know `delete`, which fails when absent.
        nft_in(host, f"delete table inet {_table(fault_id)}\n", check=False)


def tables(host: Host) -> list[str]:
    """The fault tables in force on `host` now (for status and for tests)."""
    done = subprocess.run(
        host.exec_argv([_nft(), "list", "tables"]), capture_output=True, text=True, timeout=15
    )
    return [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("table inet stts_")]
