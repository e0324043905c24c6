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
  ways. (No delay: this kernel has no netem, see net_faults.py.)
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from streamtts.infra.local.net_faults import LinkRule
from streamtts.infra.local.net_hosts import Host

BROKER_HOSTS = ("kafka-1", "kafka-2", "kafka-3")
NEMESES = ("zombie_front", "zombie_synth", "isolate_leader", "asymmetric", "sink_minio", "lossy_synth")
NEEDS_QUORUM = frozenset({"isolate_leader"})
"""Nemeses that need three brokers (one of them isolated, two still a majority)."""
LOSS_PCT = 5


@dataclass(frozen=True)
class Step:
    """One nemesis of a schedule: starts `at_s` after the run's load began, heals after
    `duration_s`."""

    nemesis: str
    at_s: float
    duration_s: float


def _addresses(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(Host(n).address for n in names)


def rules(nemesis: str, brokers: int, leader: Callable[[], int]) -> tuple[list[LinkRule], str]:
    """The link rules of `nemesis` on a run with `brokers` brokers, and what it targets.
    `leader()` names the node leading most of tts.requests (asked only by isolate_leader)."""
    broker_names = BROKER_HOSTS[:brokers]
    all_brokers = _addresses(broker_names)
    if nemesis == "zombie_front":
        return [LinkRule(Host("front"), all_brokers)], "front ⇹ brokers"
    if nemesis == "zombie_synth":
        return [LinkRule(Host("synth1"), all_brokers)], "synth1 ⇹ brokers"
    if nemesis == "isolate_leader":
        if brokers < 3:
            raise ValueError("isolate_leader needs three brokers")
        node = leader()
        others = tuple(n for n in broker_names if n != f"kafka-{node}")
        return [LinkRule(Host(f"kafka-{node}"), _addresses(others))], f"kafka-{node} ⇹ other brokers"
    if nemesis == "asymmetric":
        return [LinkRule(Host("front"), all_brokers, inbound=False)], "front → brokers dropped"
    if nemesis == "sink_minio":
        minio = _addresses(["minio"])
        return [LinkRule(Host("front"), minio), LinkRule(Host("front2"), minio)], "fronts ⇹ minio"
    if nemesis == "lossy_synth":
        return [
            LinkRule(Host(name), all_brokers, loss_pct=LOSS_PCT) for name in ("synth1", "synth2")
        ], f"synths ⇹ brokers {LOSS_PCT} % loss"
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
