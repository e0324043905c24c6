"""Nemeses: network faults between the hosts of a run (`net_hosts.py`), each with a start, a
duration and a heal, composable, and a seeded schedule that mixes them.

Each nemesis is the set of link rules it puts in force (`net_faults.LinkRule`), resolved when it
starts (the partition leader it isolates is whichever broker leads then).

- `zombie_front`: the first front worker (segment, encode, sink) cut from every broker but not
  from MinIO — it can still upload, and must not make anything visible the live owner (front2)
  did not also make; fencing keeps its late writes out.
- `zombie_synth`: the first synthesize worker cut from every broker (synth2 takes over).
- `isolate_leader`: the broker leading most partitions of tts.requests cut from the other
  brokers (and their controllers) but not from any client.
- `asymmetric`: the brokers stop hearing the first front worker; it still hears them.
- `sink_minio`: both front workers (their sinks) cut from MinIO.
- `lossy_synth`: 5 % of the packets between the synthesize workers and the brokers lost, both
  ways.
- `slow_synth`: the synthesize workers' links to the brokers slowed to 100–300 ms each way
  (jitter drawn per read) with 3 % loss. The delay is userspace (`net_shaper.py`: this kernel
  has no netem), so a run that may draw it puts the shapers in place before its workers start.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from streamtts.infra.local.net_faults import LinkRule
from streamtts.infra.local.net_hosts import LOCAL_NET, Host, HostNet

BROKER_HOSTS = ("kafka-1", "kafka-2", "kafka-3")
NEMESES = (
    "zombie_front",
    "zombie_synth",
    "isolate_leader",
    "asymmetric",
    "sink_minio",
    "lossy_synth",
    "slow_synth",
)
NEEDS_QUORUM = frozenset({"isolate_leader"})
"""Nemeses that need three brokers (one of them isolated, two still a majority)."""
NEEDS_SHAPERS = frozenset({"slow_synth"})
"""Nemeses that slow links through the synthesize hosts' shapers (started with the workers)."""
LOSS_PCT = 5
SLOW_MS = (100.0, 300.0)
SLOW_LOSS_PCT = 3


@dataclass(frozen=True)
class Fault:
    """What a nemesis puts in force: link rules (cuts, loss) and a delay on some hosts' shapers."""

    link_rules: list[LinkRule]
    target: str
    delayed: tuple[str, ...] = ()
    """Hosts whose shaper holds their links to the brokers `delay_ms` while the fault lasts."""
    delay_ms: tuple[float, float] = (0.0, 0.0)


@dataclass(frozen=True)
class Step:
    """One nemesis of a schedule: starts `at_s` after the run's load began, heals after
    `duration_s`."""

    nemesis: str
    at_s: float
    duration_s: float


@dataclass(frozen=True)
class Cluster:
    """Who is on which host in a run: the nemeses target these names."""

    brokers: int = 3
    fronts: tuple[str, ...] = ("front", "front2")
    synths: tuple[str, ...] = ("synth1", "synth2")
    net: HostNet = LOCAL_NET

    def host(self, name: str) -> Host:
        return Host(name, self.net)

    def addresses(self, names: Iterable[str]) -> tuple[str, ...]:
        return tuple(self.host(n).address for n in names)

    @property
    def broker_names(self) -> tuple[str, ...]:
        return BROKER_HOSTS[: self.brokers]


def fault(nemesis: str, cluster: Cluster, leader: Callable[[], int]) -> Fault:
    """What `nemesis` puts in force in `cluster`. `leader()` names the node leading most of
    tts.requests (asked only by isolate_leader)."""
    brokers = cluster.addresses(cluster.broker_names)
    front, synth = cluster.host(cluster.fronts[0]), cluster.host(cluster.synths[0])
    if nemesis == "zombie_front":
        return Fault([LinkRule(front, brokers)], f"{front.name} ⇹ brokers")
    if nemesis == "zombie_synth":
        return Fault([LinkRule(synth, brokers)], f"{synth.name} ⇹ brokers")
    if nemesis == "isolate_leader":
        if cluster.brokers < 3:
            raise ValueError("isolate_leader needs three brokers")
        node = f"kafka-{leader()}"
        others = cluster.addresses(n for n in cluster.broker_names if n != node)
        return Fault([LinkRule(cluster.host(node), others)], f"{node} ⇹ other brokers")
    if nemesis == "asymmetric":
        return Fault([LinkRule(front, brokers, inbound=False)], f"{front.name} → brokers dropped")
    if nemesis == "sink_minio":
        minio = cluster.addresses(["minio"])
        return Fault([LinkRule(cluster.host(n), minio) for n in cluster.fronts], "fronts ⇹ minio")
    if nemesis == "lossy_synth":
        lossy = [LinkRule(cluster.host(n), brokers, loss_pct=LOSS_PCT) for n in cluster.synths]
        return Fault(lossy, f"synths ⇹ brokers {LOSS_PCT} % loss")
    if nemesis == "slow_synth":
        lossy = [LinkRule(cluster.host(n), brokers, loss_pct=SLOW_LOSS_PCT) for n in cluster.synths]
        low, high = SLOW_MS
        target = f"synths ⇹ brokers {low:.0f}–{high:.0f} ms, {SLOW_LOSS_PCT} % loss"
        return Fault(lossy, target, delayed=cluster.synths, delay_ms=SLOW_MS)
    raise ValueError(f"unknown nemesis {nemesis!r}; nemeses are {', '.join(NEMESES)}")


def fixed_schedule(nemeses: list[str], *, start_s: float, duration_s: float, gap_s: float) -> list[Step]:
    """The nemeses one after another: each `duration_s`, `gap_s` of calm between them."""
    steps: list[Step] = []
    at = start_s
    for name in nemeses:
        steps.append(Step(name, at, duration_s))
        at += duration_s + gap_s
    return steps


def random_schedule(
    seed: int, *, total_s: float, brokers: int, start_s: float = 10.0, nemeses: tuple[str, ...] = NEMESES
) -> list[Step]:
    """A seeded, replayable mix: nemeses drawn at random, 10–30 s each, 5–15 s of calm between,
    until `total_s`; the same seed gives the same schedule."""
    pool = [n for n in nemeses if brokers >= 3 or n not in NEEDS_QUORUM]
    rng = random.Random(seed)
    steps: list[Step] = []
    at = start_s
    while True:
        duration = rng.uniform(10.0, 30.0)
        if at + duration > total_s:
            return steps
        steps.append(Step(rng.choice(pool), round(at, 1), round(duration, 1)))
        at += duration + rng.uniform(5.0, 15.0)
