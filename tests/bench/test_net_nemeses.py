"""What each nemesis puts in force, and the seeded schedule: pure, no hosts needed."""

from __future__ import annotations

import itertools

import pytest

from streamtts.bench.net_nemeses import NEEDS_QUORUM, NEMESES, Cluster, fault, random_schedule

CLUSTER = Cluster()


def _never_asked() -> int:
    raise AssertionError("only isolate_leader asks for the leader")


def test_slow_synth_delays_every_synthesizer_and_thins_its_links_to_the_brokers_only() -> None:
    slow = fault("slow_synth", CLUSTER, _never_asked)
    assert slow.delayed == ("synth1", "synth2")
    low, high = slow.delay_ms
    assert 0 < low < high
    assert {r.host.name for r in slow.link_rules} == {"synth1", "synth2"}
    brokers = CLUSTER.addresses(CLUSTER.broker_names)
    for rule in slow.link_rules:
        assert rule.peers == brokers and 1 <= rule.loss_pct < 100 and rule.outbound and rule.inbound


def test_cuts_delay_nothing_and_an_isolated_leader_keeps_its_clients() -> None:
    for name in NEMESES:
        if name != "slow_synth":
            assert fault(name, CLUSTER, lambda: 2).delayed == (), name
    isolated = fault("isolate_leader", CLUSTER, lambda: 2)
    (rule,) = isolated.link_rules
    assert rule.host.name == "kafka-2"
    assert set(rule.peers) == set(CLUSTER.addresses(["kafka-1", "kafka-3"])), "clients must still reach it"
    with pytest.raises(ValueError, match="three brokers"):
        fault("isolate_leader", Cluster(brokers=1), lambda: 1)
    with pytest.raises(ValueError, match="unknown nemesis"):
        fault("flood", CLUSTER, _never_asked)


def test_a_seed_replays_its_schedule_and_one_broker_never_draws_a_quorum_nemesis() -> None:
    first = random_schedule(7, total_s=600, brokers=3)
    assert first == random_schedule(7, total_s=600, brokers=3)
    assert first != random_schedule(8, total_s=600, brokers=3)
    assert all(step.at_s + step.duration_s <= 600 for step in first)
    assert all(b.at_s >= a.at_s + a.duration_s for a, b in itertools.pairwise(first))
    single = random_schedule(7, total_s=600, brokers=1)
    assert single and not NEEDS_QUORUM & {step.nemesis for step in single}
