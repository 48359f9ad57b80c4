"""The local Kafka broker picks its own client port (port 0), keeps it for restarts, and
picks its controller port again when another process took it first."""

from __future__ import annotations

import socket
from pathlib import Path

import psutil
import pytest

from s3tm.local import kafka_broker
from s3tm.local.kafka_broker import BrokerSettings, KafkaBroker


def _listening_ports(pid: int) -> set[int]:
    return {
        c.laddr.port
        for c in psutil.Process(pid).net_connections("inet")
        if c.status == psutil.CONN_LISTEN
    }


def test_the_fixture_broker_listens_where_it_says(kafka_broker):
    """Started with port 0: the bootstrap names the port the broker bound itself."""
    assert kafka_broker.settings.port == 0
    status = kafka_broker.status()
    assert status.running and kafka_broker.port > 0
    assert status.bootstrap == f"127.0.0.1:{kafka_broker.port}"
    assert kafka_broker.port in _listening_ports(status.pid)


def test_client_port_from_the_acceptor_lines():
    log = (
        "[t] INFO Awaiting socket connections on 127.0.0.1:41000. (kafka.network.X)\n"
        "[t] INFO Awaiting socket connections on 127.0.0.1:42000. (kafka.network.X)\n"
    )
    assert kafka_broker._client_port(log, controller_port=41000) == 42000
    assert kafka_broker._client_port(log[: log.index("\n")], controller_port=41000) == 0


@pytest.mark.kafka  # starts a broker of its own
def test_a_taken_controller_port_is_picked_again_and_the_client_port_survives_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    picks = [taken.getsockname()[1]]  # the first pick is a port another process holds
    real_free_port = kafka_broker.free_port

    def free_port() -> int:
        return picks.pop(0) if picks else real_free_port()

    monkeypatch.setattr(kafka_broker, "free_port", free_port)
    broker = KafkaBroker(BrokerSettings(folder=tmp_path / "kafka", port=0, log_level="WARN"))
    try:
        status = broker.start()
        assert not picks, "the taken port was not tried"
        assert "Address already in use" in broker.log.read_text()
        assert status.running and broker.port not in (0, taken.getsockname()[1])
        first = broker.bootstrap
        assert broker.create_topic("kept", 2)
        broker.kill()
        assert broker.start().bootstrap == first  # back where its clients look
        assert broker.port in _listening_ports(broker.pid())
        assert not broker.create_topic("kept", 2)  # its data came back with it
    finally:
        broker.stop()
        taken.close()
