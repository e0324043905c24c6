"""The layout of a local multi-node Kafka cluster: N KRaft nodes on loopback, each a combined
broker+controller and a voter of one controller quorum (the production shape, on one machine).

Ports derive from the bootstrap port P: node i (1-based) listens on P+i-1 and its controller
on P+100+i-1, so three nodes on 29092 use 29092-29094 and 29192-29194. Each node has its own
state subdir, pid file and log (`kafka-1` … `kafka-N`), apart from the single node's `kafka`,
so the two layouts never share storage. `infra up --brokers N` records N in the run dir, so
`infra down` and `infra status` find the same nodes without being told again.
"""

from __future__ import annotations

from pathlib import Path

from streamtts.errors import InfraError
from streamtts.infra.local.kafka_server import KafkaNode
from streamtts.infra.local.net_hosts import LOCAL_NET, Host, HostNet
from streamtts.infra.local.paths import LocalPaths

CONTROLLER_PORT_OFFSET = 100
MAX_BROKERS = 9


def cluster_nodes(paths: LocalPaths, host: str, port: int, brokers: int) -> tuple[KafkaNode, ...]:
    """The nodes of a `brokers`-node cluster whose first broker listens on `port`."""
    if brokers == 1:
        return (KafkaNode(paths=paths, host=host, port=port, controller_port=port + 1),)
    if not 3 <= brokers <= MAX_BROKERS or brokers % 2 == 0:
        # A quorum of 2 survives no failure and adds a voter to lose: 1, or an odd 3..9.
        raise InfraError(f"--brokers must be 1 or an odd number from 3 to {MAX_BROKERS}, not {brokers}")
    ids = range(1, brokers + 1)
    voters = ",".join(f"{i}@{host}:{port + CONTROLLER_PORT_OFFSET + i - 1}" for i in ids)
    return tuple(
        KafkaNode(
            paths=paths,
            host=host,
            port=port + i - 1,
            controller_port=port + CONTROLLER_PORT_OFFSET + i - 1,
            node_id=i,
            name=f"kafka-{i}",
            voters=voters,
            cluster_size=brokers,
        )
        for i in ids
    )


def _layout_file(paths: LocalPaths) -> Path:
    return paths.run_dir / "kafka-brokers"


def recorded_brokers(paths: LocalPaths) -> int:
    """The broker count the last `infra up` started here (1 when none was recorded)."""
    try:
        return int(_layout_file(paths).read_text().strip())
    except (OSError, ValueError):
        return 1


def record_brokers(paths: LocalPaths, brokers: int) -> None:
    paths.run_dir.mkdir(parents=True, exist_ok=True)
    _layout_file(paths).write_text(str(brokers))


def forget_brokers(paths: LocalPaths) -> None:
    _layout_file(paths).unlink(missing_ok=True)


def host_nodes(paths: LocalPaths, brokers: int, net: HostNet = LOCAL_NET) -> tuple[KafkaNode, ...]:
    """The nodes of a `brokers`-node cluster whose every node is a host of its own
    (`net_hosts.py`: kafka-1 … kafka-N, each on its own address, ports 9092/9093)."""
    if brokers not in (1, 3):
        raise InfraError(f"hosts of their own hold 1 or 3 brokers, not {brokers}")
    hosts = [Host(f"kafka-{i}", net) for i in range(1, brokers + 1)]
    voters = ",".join(f"{i}@{h.address}:9093" for i, h in enumerate(hosts, start=1))
    return tuple(
        KafkaNode(
            paths=paths,
            host=h.address,
            port=9092,
            controller_port=9093,
            node_id=i,
            name=f"kafka-{i}",
            voters=voters,
            cluster_size=brokers,
            netns=h.netns,
        )
        for i, h in enumerate(hosts, start=1)
    )
