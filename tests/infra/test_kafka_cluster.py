"""The layout of a local multi-node cluster and the topic profile it gets, without starting Kafka."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from streamtts.errors import ConfigError, InfraError
from streamtts.infra.local.kafka_cluster import (
    cluster_nodes,
    forget_brokers,
    record_brokers,
    recorded_brokers,
)
from streamtts.infra.local.kafka_server import KafkaNode
from streamtts.infra.local.paths import LocalPaths
from streamtts.infra.local.stack import LocalStack
from streamtts.infra.topics import TopicSpec, choose_profile, load_profiles, load_spec
from streamtts.runtime.settings import KafkaSettings, S3Settings, Settings


def _paths(tmp_path: Path) -> LocalPaths:
    return LocalPaths(cache_dir=tmp_path / "cache", state_dir=tmp_path / "state")


def _props(node: KafkaNode) -> dict[str, str]:
    node._write_config()
    return dict(line.split("=", 1) for line in node.config_file.read_text().splitlines())


def test_three_nodes_are_voters_of_one_quorum_each_with_its_own_ports_and_state(tmp_path: Path) -> None:
    nodes = cluster_nodes(_paths(tmp_path), "127.0.0.1", 29092, 3)
    assert [n.port for n in nodes] == [29092, 29093, 29094]
    assert [n.controller_port for n in nodes] == [29192, 29193, 29194]
    assert len({n.data_dir for n in nodes} | {n.pid_file for n in nodes} | {n.log_file for n in nodes}) == 9
    voters = "1@127.0.0.1:29192,2@127.0.0.1:29193,3@127.0.0.1:29194"
    for i, node in enumerate(nodes, start=1):
        props = _props(node)
        assert props["node.id"] == str(i) and props["controller.quorum.voters"] == voters
        assert props["process.roles"] == "broker,controller"
        assert props["listeners"] == f"PLAINTEXT://127.0.0.1:{29091 + i},CONTROLLER://127.0.0.1:{29191 + i}"
        # The transaction coordinator and group offsets must survive a broker, like the data.
        assert props["transaction.state.log.replication.factor"] == "3"
        assert props["transaction.state.log.min.isr"] == "2"
        assert props["offsets.topic.replication.factor"] == "3"
        assert props["min.insync.replicas"] == "2" and props["unclean.leader.election.enable"] == "false"


def test_one_node_keeps_the_single_node_layout(tmp_path: Path) -> None:
    (node,) = cluster_nodes(_paths(tmp_path), "127.0.0.1", 9092, 1)
    assert (node.name, node.port, node.controller_port) == ("kafka", 9092, 9093)
    assert node.data_dir == tmp_path / "state" / "kafka" / "data"
    props = _props(node)
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert props["transaction.state.log.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"


def test_a_broker_session_is_kafkas_own_unless_shortened(tmp_path: Path) -> None:
    (node,) = cluster_nodes(_paths(tmp_path), "127.0.0.1", 9092, 1)
    props = _props(node)
    assert "broker.session.timeout.ms" not in props and "broker.heartbeat.interval.ms" not in props
    short = _props(replace(node, broker_session_timeout_ms=4000))
    assert short["broker.session.timeout.ms"] == "4000"
    assert short["broker.heartbeat.interval.ms"] == "1000", "several heartbeats per session"


@pytest.mark.parametrize("brokers", [0, 2, 4, 11])
def test_a_quorum_that_cannot_survive_a_failure_is_refused(tmp_path: Path, brokers: int) -> None:
    with pytest.raises(InfraError, match="--brokers"):
        cluster_nodes(_paths(tmp_path), "127.0.0.1", 29092, brokers)


def test_down_and_status_find_the_broker_count_up_recorded(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    settings = Settings(
        kafka=KafkaSettings(bootstrap_servers="127.0.0.1:29092"), s3=S3Settings(endpoint="127.0.0.1:29000")
    )
    assert recorded_brokers(paths) == 1
    assert len(LocalStack.from_settings(settings, paths).brokers) == 1
    record_brokers(paths, 3)
    stack = LocalStack.from_settings(settings, paths)
    assert [n.name for n in stack.brokers] == ["kafka-1", "kafka-2", "kafka-3"]
    assert stack.bootstrap == "127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094"
    assert len(LocalStack.from_settings(settings, paths, brokers=1).brokers) == 1  # an explicit count wins
    forget_brokers(paths)
    assert recorded_brokers(paths) == 1


def test_voters_formatted_for_different_clusters_are_refused(tmp_path: Path) -> None:
    settings = Settings(
        kafka=KafkaSettings(bootstrap_servers="127.0.0.1:29092"), s3=S3Settings(endpoint="127.0.0.1:29000")
    )
    stack = LocalStack.from_settings(settings, _paths(tmp_path), brokers=3)
    for node, cluster_id in zip(
        stack.brokers, ("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAA", None), strict=True
    ):
        if cluster_id:
            node.data_dir.mkdir(parents=True)
            (node.data_dir / "meta.properties").write_text(f"node.id=1\ncluster.id={cluster_id}\nversion=1\n")
    assert stack._cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"  # a fresh third voter joins the same cluster
    (stack.brokers[1].data_dir / "meta.properties").write_text("cluster.id=BBBBBBBBBBBBBBBBBBBBBB\n")
    with pytest.raises(InfraError, match="different clusters"):
        stack._cluster_id()


def test_the_shipped_spec_replicates_three_ways_on_three_brokers() -> None:
    profiles = load_profiles()
    assert choose_profile(profiles, 1) is None
    chosen = choose_profile(profiles, 3)
    assert chosen is not None and chosen.name == "replicated"
    specs = chosen.apply(load_spec())
    assert {s.replication_factor for s in specs} == {3}
    assert {s.configs["min.insync.replicas"] for s in specs} == {"2"}
    # Topic-specific configs survive the profile.
    by_name = {s.name: s for s in specs}
    assert by_name["tts.lexicons"].configs["cleanup.policy"] == "compact"
    assert {s.replication_factor for s in load_spec()} == {1}  # the plain spec: one node


def test_profiles_pick_the_largest_the_cluster_reaches(tmp_path: Path) -> None:
    spec = tmp_path / "topics.yaml"
    spec.write_text(
        "topics: {a: {partitions: 1}}\n"
        "profiles:\n"
        "  three: {brokers: 3, replication_factor: 3}\n"
        "  five: {brokers: 5, replication_factor: 3, configs: {min.insync.replicas: 3}}\n"
    )
    profiles = load_profiles(spec)
    chosen = [getattr(choose_profile(profiles, n), "name", None) for n in (2, 3, 4, 5, 7)]
    assert chosen == [None, "three", "three", "five", "five"]
    applied = profiles["five"].apply([TopicSpec("a", 1, 1, {"retention.ms": "1"})])
    assert applied == [TopicSpec("a", 1, 3, {"retention.ms": "1", "min.insync.replicas": "3"})]


@pytest.mark.parametrize(
    "body",
    [
        "p: {brokers: 3, replication_factor: 4}",
        "p: {brokers: 3}",
        "p: {brokers: 3, replication_factor: 3, acks: all}",
    ],
)
def test_a_malformed_profile_is_refused_by_name(tmp_path: Path, body: str) -> None:
    spec = tmp_path / "topics.yaml"
    spec.write_text("topics: {a: {partitions: 1}}\nprofiles:\n  " + body + "\n")
    with pytest.raises(ConfigError, match="profile 'p'"):
        load_profiles(spec)
