"""A single-node Kafka broker (KRaft: broker and controller in one process) on loopback,
run from the jars ``make setup`` resolved (``docker/jars/pom.xml``, profile
``kafka-broker``): what ``docker/compose.yaml``'s ``kafka`` service runs, without Docker.

``s3tm kafka start|stop|status`` and the tests' broker fixture use it. The broker's folder
holds its config, data, log and pid file; ``start`` formats it on first use and is a no-op
when a broker already runs there.

Port 0 lets the broker pick its client port (read back from its log) on the first start;
the folder keeps it, and a restart on the same data comes back on it, where its clients
look. The KRaft controller binds a port of its own choosing at every start: the quorum is
dynamic (KIP-853: formatted ``--standalone``, found through
``controller.quorum.bootstrap.servers``), so no voter set names its port beforehand, and
the node corrects its own ephemeral endpoint once bound. Nothing picks a port for it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil

from core.errors import InputDataError, InvalidArgumentError
from spark_jobs.kafka_security import LOGIN_MODULES, KafkaSecurity, jaas_quoted
from spark_jobs.lake.jars import KAFKA_BROKER, classpath
from spark_jobs.settings import PlatformSettings

DEFAULT_DIR: Path = PlatformSettings.model_fields["kafka_dir"].default
DEFAULT_PORT = 9092
START_TIMEOUT_S = 90.0
# the line that names the port a listener bound, one per listener
_BOUND = re.compile(r"(\w+): resolved ephemeral port to (\d+) ")
# the broker's heap: a test broker holds a few topics of a few MB
HEAP = "-Xmx512m"

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.apache.name = org.apache.kafka
logger.apache.level = {level}
# the line that says which port each listener bound, whatever the level
logger.listeners.name = org.apache.kafka.metadata.ListenerInfo
logger.listeners.level = INFO
"""


# the SCRAM mechanism a TLS broker offers beside PLAIN (prod's: infra/k8s/overlays/prod)
SCRAM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class BrokerTls:
    """A broker whose client listener wants TLS and SASL (``SASL_SSL``; mechanisms PLAIN and
    SCRAM-SHA-512, the broker's own calls PLAIN): ``keystore`` a PEM file of its private key
    (PKCS#8) and certificate chain, ``ca`` the PEM certificate of the CA that signed it,
    ``users`` the clients it accepts (name and password, both mechanisms; no ``=`` or ``,``
    in them). The first user is the one the broker's own admin calls use."""

    keystore: Path
    ca: Path
    users: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not self.users:
            raise InvalidArgumentError("a TLS broker needs at least one SASL user")
        if any(set(',=]"\\') & set(name + password) for name, password in self.users):
            raise InvalidArgumentError('SASL user names and passwords: no , = ] " or \\')
        for path in (self.keystore, self.ca):
            if not Path(path).is_file():
                raise InvalidArgumentError(f"{path}: no such file")

    def client(self) -> KafkaSecurity:
        """What a client of this broker sets (its first user)."""
        name, password = self.users[0]
        return KafkaSecurity("SASL_SSL", "PLAIN", name, password, str(self.ca))


@dataclass(frozen=True)
class BrokerSettings:
    """Where a broker lives and listens. ``port`` 0: one the broker picks on its first start,
    kept in the folder. ``controller_port`` 0: one the broker picks at each start (nothing
    outside the broker connects to it). ``tls``: the client listener wants TLS and SASL
    (None: plaintext)."""

    folder: Path = DEFAULT_DIR
    port: int = DEFAULT_PORT
    controller_port: int = 0
    log_level: str = "INFO"
    tls: BrokerTls | None = None


@dataclass(frozen=True)
class BrokerStatus:
    """A broker's folder as ``status`` finds it."""

    running: bool
    pid: int | None
    bootstrap: str
    log: Path


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise InputDataError("the Kafka broker needs Java 17 (java on PATH or JAVA_HOME)")
    return java


def _broker_classpath() -> str:
    entries = classpath(KAFKA_BROKER)
    if not entries:
        raise InputDataError(
            "the Kafka broker's jars are not resolved here: run `make setup` "
            "(it resolves docker/jars/pom.xml's kafka-broker profile with Maven)"
        )
    return os.pathsep.join(entries)


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid,
    which also avoids a leading '-': it reads as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _tls_properties(tls: BrokerTls) -> dict[str, str]:
    """The client listener's TLS (PEM key and trust stores) and SASL PLAIN users; the
    broker's own inter-broker calls go through it as the first user."""
    name, password = tls.users[0]
    users = " ".join(f"user_{user}={jaas_quoted(secret)}" for user, secret in tls.users)
    return {
        "sasl.enabled.mechanisms": f"PLAIN,{SCRAM}",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        # SCRAM's users are in the cluster's metadata (formatted with them)
        f"listener.name.sasl_ssl.{SCRAM.lower()}.sasl.jaas.config": (
            f"{LOGIN_MODULES[SCRAM]} required;"
        ),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            f"{LOGIN_MODULES['PLAIN']} required username={jaas_quoted(name)} "
            f"password={jaas_quoted(password)} {users};"
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(Path(tls.keystore).resolve()),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(Path(tls.ca).resolve()),
    }


def _properties(
    port: int, controller_port: int, data: Path, voters: str = "", tls: BrokerTls | None = None
) -> str:
    """The broker's config. A port 0: the broker binds a free port and advertises the one it
    bound (Kafka resolves an ephemeral listener's port before it registers it). A dynamic
    quorum, or with ``voters`` the static voter set of a folder an earlier version formatted.
    ``tls``: the client listener is SASL_SSL (the controller's stays plaintext on loopback).
    """
    client = "SASL_SSL" if tls else "PLAINTEXT"
    listeners = f"{client}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"
    # one node leads its own dynamic quorum: it never dials the bootstrap address
    quorum = (
        {"controller.quorum.voters": voters}
        if voters
        else {"controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}"}
    )
    values = {
        "process.roles": "broker,controller",
        "node.id": "1",
        **quorum,
        "listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": client,
        "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{client}:{client}",
        "log.dirs": str(data),
        # one node: every internal topic has one replica
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # topics are made on purpose (a typo in a topic name must not create one)
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        **(_tls_properties(tls) if tls else {}),
    }
    return "".join(f"{key}={value}\n" for key, value in values.items())


class KafkaBroker:
    """One broker folder: start, stop, status, topics."""

    def __init__(self, settings: BrokerSettings | None = None) -> None:
        self.settings = settings or BrokerSettings()
        self.folder = self.settings.folder.resolve()

    @property
    def port(self) -> int:
        """The client port: the one the broker in this folder bound last (kept for restarts),
        else the settings' (0 until a broker picked one)."""
        try:
            return int(self._port_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return self.settings.port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def client_security(self) -> KafkaSecurity:
        """What a client of this broker sets: plaintext, or its TLS settings' first user."""
        return self.settings.tls.client() if self.settings.tls else KafkaSecurity()

    @property
    def log(self) -> Path:
        return self.folder / "broker.log"

    @property
    def _port_file(self) -> Path:
        return self.folder / "broker.port"

    @property
    def _pid_file(self) -> Path:
        return self.folder / "broker.pid"

    def pid(self) -> int | None:
        """The running broker's process id (None: not running)."""
        try:
            pid = int(self._pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        # a zombie child of this process counts as gone (and is reaped)
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return None
        except ChildProcessError:
            pass  # not our child
        try:
            zombie = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return None
        except psutil.Error:
            return pid
        return None if zombie else pid

    def status(self) -> BrokerStatus:
        pid = self.pid()
        return BrokerStatus(pid is not None, pid, self.bootstrap, self.log)

    def _format(self, config: Path, data: Path) -> None:
        if (data / "meta.properties").exists():
            return
        command = [
            _java(),
            "-cp",
            _broker_classpath(),
            f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            _cluster_id(),
            "--config",
            str(config),
            "--ignore-formatted",
            "--standalone",  # a dynamic quorum of this one node
        ]
        for name, password in self.settings.tls.users if self.settings.tls else ():
            # SCRAM credentials live in the cluster's metadata: written when it is formatted
            command += ["--add-scram", f"{SCRAM}=[name={name},password={password}]"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise InputDataError(
                f"formatting the Kafka storage in {data} failed: {done.stderr.strip()[-800:]}"
            )

    def start(self, timeout_s: float = START_TIMEOUT_S) -> BrokerStatus:
        """Start the broker in the background (formatting its storage the first time) and
        wait until it answers. Already running: nothing to do.

        Raises:
            InputDataError: no Java or jars, a port in use, or the broker died or did not
                answer within ``timeout_s`` (the end of its log is in the message).
        """
        running = self.status()
        if running.running:
            return running
        # the settings' port, else the one a broker here picked before, else a new pick
        port = self.settings.port or self.port
        if port:
            # a broker killed a moment ago may still hold its port while it exits
            _wait_free(port, "pick another (--port)")
        data = self.folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        (self.folder / "log4j2.properties").write_text(
            LOG4J2.format(log=self.log, level=self.settings.log_level)
        )
        config = self.folder / "server.properties"
        voters = _static_voters(config, data)
        # formatted with a static quorum: its voter set names the controller's port
        controller_port = int(voters.rsplit(":", 1)[1]) if voters else self.settings.controller_port
        if controller_port:
            _wait_free(controller_port, "stop what holds it, or leave the controller's port 0")
        config.write_text(_properties(port, controller_port, data, voters, self.settings.tls))
        self._format(config, data)
        return self._launch(config, port, timeout_s)

    def _launch(self, config: Path, port: int, timeout_s: float) -> BrokerStatus:
        """Runs the broker on ``config`` and waits until it answers; keeps the client port
        it bound."""
        log_start = self.log.stat().st_size if self.log.exists() else 0
        command = [
            _java(),
            HEAP,
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.folder / 'log4j2.properties'}",
            "-cp",
            _broker_classpath(),
            "kafka.Kafka",
            str(config),
        ]
        with open(self.folder / "broker.out", "ab") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives the command that started it
            )
        self._pid_file.write_text(f"{process.pid}\n")
        deadline = time.monotonic() + timeout_s
        bound = port
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self._pid_file.unlink(missing_ok=True)
                raise InputDataError(
                    f"the Kafka broker exited with {process.returncode}: {self._tail()}"
                )
            if not bound:
                bound = _client_port(self._log_since(log_start))
            if bound and _listening(bound) and self._answers(f"127.0.0.1:{bound}"):
                self._port_file.write_text(f"{bound}\n")
                return self.status()
            time.sleep(0.5)
        self.stop()
        raise InputDataError(f"the Kafka broker did not answer in {timeout_s:.0f}s: {self._tail()}")

    def _log_since(self, offset: int) -> str:
        if not self.log.exists():
            return ""
        with self.log.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def _answers(self, bootstrap: str) -> bool:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        try:
            admin = KafkaAdminClient(
                bootstrap_servers=[bootstrap],
                request_timeout_ms=3000,
                **self.client_security.client_options(),
            )
        except (KafkaError, OSError):
            return False
        try:
            admin.list_topics()
            return True
        except (KafkaError, OSError):
            return False
        finally:
            admin.close()

    def _tail(self, lines: int = 15) -> str:
        for path in (self.folder / "broker.out", self.log):
            if path.exists():
                text = path.read_text(errors="replace").strip().splitlines()
                errors = [line for line in text if "ERROR" in line or "Exception" in line]
                if errors or path == self.log:
                    return "\n".join((errors or text)[-lines:])
        return "(no log)"

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop the broker (SIGTERM: a clean shutdown; SIGKILL after ``timeout_s``).
        Returns whether one was running."""
        pid = self.pid()
        if pid is None:
            self._pid_file.unlink(missing_ok=True)
            return False
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.pid() is not None:
            time.sleep(0.2)
        if self.pid() is not None:
            _signal(pid, signal.SIGKILL)
            while self.pid() is not None:
                time.sleep(0.1)
        self._pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> None:
        """SIGKILL the broker (a crash, for tests); ``start`` brings it back on its data."""
        pid = self.pid()
        if pid is not None:
            _signal(pid, signal.SIGKILL)
            while self.pid() is not None:
                time.sleep(0.1)
        self._pid_file.unlink(missing_ok=True)

    def create_topic(self, topic: str, partitions: int) -> bool:
        """Create ``topic`` with ``partitions`` partitions (one replica). Returns False when it
        exists already with that many partitions.

        Raises:
            InvalidArgumentError: it exists with another partition count.
        """
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        if partitions < 1:
            raise InvalidArgumentError(f"partitions must be >= 1, got {partitions}")
        admin = KafkaAdminClient(
            bootstrap_servers=[self.bootstrap], **self.client_security.client_options()
        )
        try:
            try:
                admin.create_topics([NewTopic(topic, partitions, 1)])
                created = True
            except TopicAlreadyExistsError:
                created = False
            # the partitions' leaders are elected asynchronously: wait for them
            deadline = time.monotonic() + 30
            while True:
                described = admin.describe_topics([topic])[0]
                ready = [p for p in described["partitions"] if p["leader_id"] >= 0]
                if not described["error_code"] and len(ready) == len(described["partitions"]):
                    break
                if time.monotonic() > deadline:
                    raise InputDataError(f"topic {topic}: partitions without a leader")
                time.sleep(0.2)
        finally:
            admin.close()
        have = len(described["partitions"])
        if not created and have != partitions:
            raise InvalidArgumentError(
                f"topic {topic} exists with {have} partitions, not {partitions}"
            )
        return created

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Each partition's end offset (records written so far)."""
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            bootstrap_servers=[self.bootstrap], **self.client_security.client_options()
        )
        try:
            partitions = consumer.partitions_for_topic(topic) or set()
            ends = consumer.end_offsets([TopicPartition(topic, p) for p in sorted(partitions)])
            return {tp.partition: int(offset) for tp, offset in ends.items()}
        finally:
            consumer.close()


def _client_port(log: str) -> int:
    """The client listener's port from the lines that name each bound port (0: not bound
    yet)."""
    ports = [int(p) for name, p in _BOUND.findall(log) if name != "CONTROLLER"]
    return ports[0] if ports else 0


def _static_voters(config: Path, data: Path) -> str:
    """The ``controller.quorum.voters`` of a folder formatted with a static quorum (by an
    earlier version of this module), else ""."""
    if not (data / "meta.properties").exists() or not config.exists():
        return ""
    key = "controller.quorum.voters="
    return next(
        (line[len(key) :] for line in config.read_text().splitlines() if line.startswith(key)), ""
    )


def _wait_free(port: int, hint: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while _listening(port):
        if time.monotonic() > deadline:
            raise InputDataError(f"port {port} is in use: {hint}")
        time.sleep(0.2)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)  # the broker leads its own session
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
