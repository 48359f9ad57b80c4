"""The local Kafka broker binds its own client port (port 0) and keeps it for restarts, and
its KRaft controller binds a port of its own at every start."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from devtools.local import kafka_broker
from devtools.local.kafka_broker import BrokerSettings, KafkaBroker


def _listening_ports(pid: int | None) -> set[int]:
    assert pid is not None, "the broker is not running"
    return {
        c.laddr.port
        for c in psutil.Process(pid).net_connections("inet")
        if c.status == psutil.CONN_LISTEN
    }


def test_the_fixture_broker_listens_where_it_says(kafka_broker):
    """Started with port 0: the bootstrap names the port the broker bound itself."""
    assert kafka_broker.settings.port == 0
    status = kafka_broker.status()
    assert status.running and 1 <= kafka_broker.port <= 65535
    assert status.bootstrap == f"127.0.0.1:{kafka_broker.port}"
    assert kafka_broker.port in _listening_ports(status.pid)


def test_client_port_from_the_lines_that_name_each_bound_port():
    log = (
        "[t] INFO CONTROLLER: resolved ephemeral port to 41000 (org.apache.kafka.metadata.X)\n"
        "[t] INFO PLAINTEXT: resolved ephemeral port to 42000 (org.apache.kafka.metadata.X)\n"
    )
    assert kafka_broker._client_port(log) == 42000
    assert kafka_broker._client_port(log[: log.index("\n")]) == 0


def test_a_folder_formatted_with_a_static_quorum_keeps_its_voters(tmp_path: Path):
    """A folder an earlier version formatted names its controller in a static voter set;
    a new one is formatted as a dynamic quorum, which names no port beforehand."""
    config, data = tmp_path / "server.properties", tmp_path / "data"
    data.mkdir()
    assert kafka_broker._static_voters(config, data) == ""  # nothing formatted
    voters = "1@127.0.0.1:41000"
    config.write_text(f"node.id=1\ncontroller.quorum.voters={voters}\n")
    assert kafka_broker._static_voters(config, data) == ""  # a config, but no data yet
    (data / "meta.properties").write_text("node.id=1\n")
    assert kafka_broker._static_voters(config, data) == voters
    text = kafka_broker._properties(0, 41000, data, voters)
    assert f"controller.quorum.voters={voters}\n" in text and "bootstrap.servers" not in text
    dynamic = kafka_broker._properties(0, 0, data)
    assert "controller.quorum.bootstrap.servers=127.0.0.1:0\n" in dynamic
    assert "voters" not in dynamic and "CONTROLLER://127.0.0.1:0" in dynamic


@pytest.mark.kafka  # starts a broker of its own
def test_both_ports_are_the_brokers_own_and_the_client_port_survives_a_crash(tmp_path: Path):
    """Nothing picks a port for the broker: its client and controller listeners bind ports
    of their own choosing, and a restart after a SIGKILL comes back on the client port."""
    broker = KafkaBroker(BrokerSettings(folder=tmp_path / "kafka", port=0, log_level="WARN"))
    try:
        status = broker.start()
        assert "controller.quorum.voters" not in (broker.folder / "server.properties").read_text()
        listening = _listening_ports(status.pid)
        assert broker.port in listening and len(listening) == 2  # the client's, the controller's
        first = broker.bootstrap
        assert broker.create_topic("kept", 2)
        broker.kill()
        assert broker.start().bootstrap == first  # back where its clients look
        assert broker.port in _listening_ports(broker.pid())
        assert not broker.create_topic("kept", 2)  # its data came back with it
    finally:
        broker.stop()


@pytest.mark.kafka  # starts a broker of its own
def test_a_broker_formatted_with_a_static_quorum_starts_on_its_voters(tmp_path: Path):
    """A folder that an earlier version formatted (static voters, the controller's port in
    them) starts again, on that port, instead of failing on a dynamic config."""
    import socket
    import subprocess

    folder = tmp_path / "kafka"
    data = folder / "data"
    data.mkdir(parents=True)
    with socket.socket() as held:  # the port the earlier version had picked
        held.bind(("127.0.0.1", 0))
        controller_port = held.getsockname()[1]
    voters = f"1@127.0.0.1:{controller_port}"
    config = folder / "server.properties"
    config.write_text(kafka_broker._properties(0, controller_port, data, voters))
    java = [kafka_broker._java(), "-cp", kafka_broker._broker_classpath()]
    cluster = ["--cluster-id", kafka_broker._cluster_id()]
    subprocess.run(
        [*java, "kafka.tools.StorageTool", "format", "--config", str(config), *cluster],
        check=True,
        capture_output=True,
        timeout=120,
    )
    broker = KafkaBroker(BrokerSettings(folder=folder, port=0, log_level="WARN"))
    try:
        status = broker.start()
        assert f"controller.quorum.voters={voters}\n" in config.read_text()
        assert {broker.port, controller_port} == _listening_ports(status.pid)
        assert broker.create_topic("after-the-upgrade", 1)
    finally:
        broker.stop()
