"""One Apache Kafka 4.x KRaft node (combined broker+controller) run from Maven Central jars.

No Docker, no tarball: `infra/kafka/pom.xml` names the broker artifacts; Maven copies them
into the per-machine cache once, and the broker runs with the machine's Java via `java -cp`.
A node is either the whole local cluster (the default) or one voter of a multi-node quorum
(`infra/local/kafka_cluster.py`), with its own ports, state dir, pid file and log.
"""

from __future__ import annotations

import base64
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from streamtts.errors import InfraError
from streamtts.infra.local import processes
from streamtts.infra.local.installer import Say, require_tool, run_step
from streamtts.infra.local.paths import LocalPaths

KAFKA_VERSION = "4.1.1"
POM = Path(__file__).resolve().parents[1] / "kafka" / "pom.xml"
LOG4J2 = Path(__file__).resolve().parents[1] / "kafka" / "log4j2.yaml"
MARKER = "kafka.Kafka"


@dataclass(frozen=True)
class KafkaNode(processes.LocalProcess):
    paths: LocalPaths
    host: str = "127.0.0.1"
    port: int = 9092
    controller_port: int = 9093
    heap: str = "512m"
    node_id: int = 1
    name: str = "kafka"
    """Service name: the state subdir, the pid file and the log file are named after it."""
    title = "Kafka"
    voters: str = ""
    """`controller.quorum.voters` of a multi-node quorum; empty: this node alone."""
    cluster_size: int = 1
    """Brokers in the cluster: internal topics are replicated across all of them."""
    netns: str = ""
    """The network namespace the node runs in (a host of its own, `net_hosts.py`); empty: this
    machine's own."""
    broker_session_timeout_ms: int | None = None
    """`broker.session.timeout.ms`: how long the controller waits for a heartbeat before it
    fences the broker. A SIGKILLed node restarted at once cannot register again until its old
    session lapses (Kafka's default, 9 s, added to every restart after a crash); None: that
    default. Tests that kill and restart a private broker shorten it."""

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def libs_dir(self) -> Path:
        return self.paths.cache_dir / f"kafka-{KAFKA_VERSION}" / "libs"

    @property
    def data_dir(self) -> Path:
        return self.paths.state_dir / self.name / "data"

    @property
    def config_file(self) -> Path:
        return self.paths.state_dir / self.name / "server.properties"

    @property
    def marker(self) -> str:
        # The config path is unique to this clone's state dir, so it identifies *our* broker.
        return str(self.config_file)

    # -- install -------------------------------------------------------------------------
    def installed(self) -> bool:
        return (self.libs_dir / ".complete").exists()

    def install(self, say: Say) -> None:
        if self.installed():
            return
        require_tool("java", "install a JDK 17+ (e.g. apt-get install openjdk-17-jre-headless)")
        mvn = require_tool("mvn", "install Maven (apt-get install maven)")
        tmp = self.libs_dir.with_name("libs.partial")
        shutil.rmtree(tmp, ignore_errors=True)
        say(f"resolving Apache Kafka {KAFKA_VERSION} from Maven Central → {self.libs_dir}")
        run_step(
            [
                mvn,
                "-B",
                "-q",
                "-f",
                str(POM),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={tmp}",
                "-DincludeScope=runtime",
                f"-Dkafka.version={KAFKA_VERSION}",
            ],
            what="resolving Kafka jars",
            log_file=self.paths.log_file("install-kafka"),
            say=say,
        )
        if not any(tmp.glob("kafka_2.13-*.jar")):
            raise InfraError(f"Maven finished but no kafka_2.13 jar landed in {tmp}")
        shutil.rmtree(self.libs_dir, ignore_errors=True)
        tmp.rename(self.libs_dir)
        (self.libs_dir / ".complete").write_text(KAFKA_VERSION)

    # -- run -----------------------------------------------------------------------------
    def start(self, say: Say, cluster_id: str | None = None) -> int:
        """Start this node unless it runs. `cluster_id` formats fresh storage (every voter of
        a quorum must carry the same one); None draws a new id for a node of its own."""
        if (pid := self.pid()) is not None:
            return pid
        java = require_tool("java", "install a JDK 17+ (e.g. apt-get install openjdk-17-jre-headless)")
        processes.require_free_ports(
            self.host,
            (self.port, self.controller_port),
            "stop it or set STREAMTTS_KAFKA_BOOTSTRAP to a free port (see docs/local-stack.md for "
            "the ports a node and a cluster use)",
            owner=self.name,
        )
        self._write_config()
        self._format_storage(java, say, cluster_id or new_cluster_id())
        say(f"starting Kafka {KAFKA_VERSION} (KRaft, node {self.node_id}) on {self.bootstrap}")
        argv = [
            java,
            f"-Xmx{self.heap}",
            "-Xms128m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={LOG4J2}",
            "-cp",
            f"{self.libs_dir}/*",
            "kafka.Kafka",
            str(self.config_file),
        ]
        return self._spawn(argv, netns=self.netns)

    def _write_config(self) -> None:
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Internal topics (offsets, transactions) are replicated like the data: a transaction
        # coordinator must survive the loss of one broker, and never accept a lone replica.
        rf, min_isr = str(self.cluster_size), str(min(2, self.cluster_size))
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters or f"{self.node_id}@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "3",
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min_isr,
            "default.replication.factor": rf,
            "min.insync.replicas": min_isr,
            # A replica that fell out of the ISR never becomes leader: that would lose records.
            "unclean.leader.election.enable": "false",
            # Tests and local runs join groups immediately instead of waiting 3 s.
            "group.initial.rebalance.delay.ms": "0",
            # Topics are code (infra/topics.yaml): never let a typo create one.
            "auto.create.topics.enable": "false",
            "message.max.bytes": str(8 * 1024 * 1024),
            "log.retention.check.interval.ms": "60000",
        }
        if self.broker_session_timeout_ms is not None:
            props["broker.session.timeout.ms"] = str(self.broker_session_timeout_ms)
            # Several heartbeats per session: one late beat on a busy machine fences nothing.
            props["broker.heartbeat.interval.ms"] = str(max(100, self.broker_session_timeout_ms // 4))
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def formatted_cluster_id(self) -> str | None:
        """The cluster id this node's storage was formatted with, None if not formatted."""
        try:
            lines = (self.data_dir / "meta.properties").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            key, _, value = line.partition("=")
            if key.strip() == "cluster.id":
                return value.strip()
        return None

    def _format_storage(self, java: str, say: Say, cluster_id: str) -> None:
        if (self.data_dir / "meta.properties").exists():
            return
        say(f"formatting KRaft storage in {self.data_dir}")
        run_step(
            [
                java,
                "-Xmx256m",
                f"-Dlog4j2.configurationFile={LOG4J2}",
                "-cp",
                f"{self.libs_dir}/*",
                "kafka.tools.StorageTool",
                "format",
                # "=" form: a base64url id may begin with "-", which argparse reads as a flag.
                f"--cluster-id={cluster_id}",
                "-c",
                str(self.config_file),
            ],
            what="formatting Kafka storage",
            log_file=self.paths.log_file(f"{self.name}-format"),
            say=say,
            timeout_s=120,
        )


def new_cluster_id(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (22 chars).

    Like Kafka's own Uuid.randomUuid, ids beginning with "-" are redrawn: command-line
    tools would take them for an option.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(random_bytes()).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
