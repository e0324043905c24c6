"""A single-node Apache Kafka 4.x (KRaft broker+controller) run from Maven Central jars.

No Docker, no tarball: `infra/kafka/pom.xml` names the broker artifacts; Maven copies them
into the per-machine cache once, and the broker runs with the machine's Java via `java -cp`.
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
class KafkaNode:
    paths: LocalPaths
    host: str = "127.0.0.1"
    port: int = 9092
    controller_port: int = 9093
    heap: str = "512m"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def libs_dir(self) -> Path:
        return self.paths.cache_dir / f"kafka-{KAFKA_VERSION}" / "libs"

    @property
    def data_dir(self) -> Path:
        return self.paths.state_dir / "kafka" / "data"

    @property
    def config_file(self) -> Path:
        return self.paths.state_dir / "kafka" / "server.properties"

    @property
    def pid_file(self) -> Path:
        return self.paths.pid_file("kafka")

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
    def pid(self) -> int | None:
        return processes.running_pid(self.pid_file, self.marker)

    def start(self, say: Say) -> int:
        if (pid := self.pid()) is not None:
            return pid
        java = require_tool("java", "install a JDK 17+ (e.g. apt-get install openjdk-17-jre-headless)")
        for port in (self.port, self.controller_port):
            if processes.port_in_use(self.host, port):
                raise InfraError(
                    f"port {port} is already in use by another process; stop it or set "
                    "STREAMTTS_KAFKA_BOOTSTRAP to a free port (the controller uses port+1)"
                )
        self._write_config()
        self._format_storage(java, say)
        say(f"starting Kafka {KAFKA_VERSION} (KRaft) on {self.bootstrap}")
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
        return processes.spawn(argv, pid_file=self.pid_file, log_file=self.paths.log_file("kafka"))

    def stop(self) -> bool:
        return processes.stop(self.pid_file, self.marker)

    def _write_config(self) -> None:
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "3",
            # Single node: internal topics cannot have more replicas than brokers.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # Tests and local runs join groups immediately instead of waiting 3 s.
            "group.initial.rebalance.delay.ms": "0",
            # Topics are code (infra/topics.yaml): never let a typo create one.
            "auto.create.topics.enable": "false",
            "message.max.bytes": str(8 * 1024 * 1024),
            "log.retention.check.interval.ms": "60000",
        }
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _format_storage(self, java: str, say: Say) -> None:
        if (self.data_dir / "meta.properties").exists():
            return
        cluster_id = _cluster_id()
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
            log_file=self.paths.log_file("kafka-format"),
            say=say,
            timeout_s=120,
        )


def _cluster_id(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (22 chars).

    Like Kafka's own Uuid.randomUuid, ids beginning with "-" are redrawn: command-line
    tools would take them for an option.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(random_bytes()).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
