"""Kafka over TLS with SASL: the settings (``spark_jobs/kafka_security.py``) spelled for both
clients, and every client of the platform against a broker that wants them (the project's
broker with a SASL_SSL listener and a CA made here): ``s3tm produce``, the ingest's offsets
and its Spark reader, the stream's source. A client without the credentials, or with wrong
ones, is refused."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from core.errors import InputDataError, InvalidArgumentError
from devtools.local.kafka_broker import SCRAM, BrokerSettings, BrokerTls, KafkaBroker
from spark_jobs.jobs import ingest, ingest_kafka
from spark_jobs.kafka_security import KafkaSecurity

ROOT = Path(__file__).resolve().parents[2]

# -- the settings ---------------------------------------------------------------------------


def test_plaintext_is_the_default_and_sets_nothing():
    security = KafkaSecurity.from_env({})
    assert security == KafkaSecurity() and security.spark_options() == {}
    assert security.client_options() == {"security_protocol": "PLAINTEXT"}


def test_sasl_ssl_is_spelled_for_the_java_client_and_for_kafka_python(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    env = {
        "KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
        "KAFKA_SASL_MECHANISM": "scram-sha-512",
        "KAFKA_SASL_USERNAME": "matcher",
        "KAFKA_SASL_PASSWORD": 'p"w\\d',
        "KAFKA_SSL_CA_FILE": str(ca),
    }
    security = KafkaSecurity.from_env(env)
    spark = security.spark_options()
    assert spark["kafka.security.protocol"] == "SASL_SSL"
    assert spark["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    # JAAS quoting: the password's quote and backslash escaped
    assert spark["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="matcher" password="p\\"w\\\\d";'
    )
    assert spark["kafka.ssl.truststore.type"] == "PEM"
    assert spark["kafka.ssl.truststore.location"] == str(ca)
    assert security.client_options() == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "matcher",
        "sasl_plain_password": 'p"w\\d',
        "ssl_cafile": str(ca),
    }
    assert 'p"w' not in repr(security)  # the password stays out of logs


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "one of PLAINTEXT"),
        ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "needs KAFKA_SASL_MECHANISM"),
        (
            {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "PLAIN"},
            "needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD",
        ),
        ({"KAFKA_SASL_USERNAME": "matcher"}, "does not use SASL"),
        ({"KAFKA_SSL_CA_FILE": "/nowhere/ca.pem"}, "uses no TLS"),
        ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CA_FILE": "/nowhere/ca.pem"}, "no such"),
    ],
)
def test_incomplete_settings_say_what_is_missing(env, message):
    with pytest.raises(InvalidArgumentError, match=message):
        KafkaSecurity.from_env(env)


# -- against a broker that wants TLS and SASL ---------------------------------------------


def _certificates(folder: Path) -> tuple[Path, Path]:
    """A CA and a broker certificate for 127.0.0.1 it signed (openssl): the broker's PEM
    keystore (key, then certificate and CA) and the CA's certificate."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=s3tm-test-ca")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key",
            "-out", "broker.csr", "-subj", "/CN=127.0.0.1")  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "broker.crt", "-days", "2",
            "-extfile", "san.ext")  # fmt: skip
    keystore = folder / "broker.pem"
    keystore.write_text(
        "".join((folder / name).read_text() for name in ("broker.key", "broker.crt", "ca.pem"))
    )
    return keystore, folder / "ca.pem"


@pytest.fixture(scope="module")
def tls_kafka_broker(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("kafka-tls")
    keystore, ca = _certificates(folder)
    users = (("s3tm-test", secrets.token_urlsafe(12)), ("matcher", secrets.token_urlsafe(12)))
    broker = KafkaBroker(
        BrokerSettings(folder=folder / "broker", port=0, log_level="WARN",
                       tls=BrokerTls(keystore, ca, users))
    )  # fmt: skip
    broker.start()
    yield broker
    broker.stop()


def _matcher(broker: KafkaBroker) -> KafkaSecurity:
    """The second user's settings, with prod's mechanism (SCRAM-SHA-512): a client other
    than the broker's own admin calls (PLAIN)."""
    tls = broker.settings.tls
    assert tls is not None
    name, password = tls.users[1]
    return KafkaSecurity("SASL_SSL", SCRAM, name, password, str(tls.ca))


def _env(security: KafkaSecurity) -> dict[str, str]:
    assert security.sasl_mechanism and security.username and security.password
    return {
        "KAFKA_SECURITY_PROTOCOL": security.protocol,
        "KAFKA_SASL_MECHANISM": security.sasl_mechanism,
        "KAFKA_SASL_USERNAME": security.username,
        "KAFKA_SASL_PASSWORD": security.password,
        "KAFKA_SSL_CA_FILE": security.ca_file or "",
    }


def test_produce_ingest_and_stream_read_a_tls_sasl_topic(tls_kafka_broker, lakehouse, tmp_path):
    from spark_jobs.stream.config import StreamConfig
    from spark_jobs.stream.pipeline import source

    topic = f"posts-{uuid.uuid4().hex[:8]}"
    assert tls_kafka_broker.create_topic(topic, 2)
    security = _matcher(tls_kafka_broker)
    corpus = tmp_path / "posts.jsonl"
    ids = [f"p{n}" for n in range(25)]
    corpus.write_text("".join(json.dumps({"id": i, "text": f"tls post {i}"}) + "\n" for i in ids))
    produced = subprocess.run(
        [sys.executable, "-m", "s3tm.cli.main", "produce", "--corpus", str(corpus),
         "--bootstrap", tls_kafka_broker.bootstrap, "--topic", topic, "--connect-timeout", "20"],
        capture_output=True, text=True, check=False, cwd=ROOT,
        env={**os.environ, **_env(security)},
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr[-2000:]
    first, end = ingest_kafka.topic_offsets(tls_kafka_broker.bootstrap, topic, security)
    assert sum(end.values()) - sum(first.values()) == len(ids)

    # the ingest: offsets through kafka-python, records through Spark's reader
    config = ingest.IngestConfig(
        source="kafka", kafka_bootstrap=tls_kafka_broker.bootstrap, kafka_topic=topic, batch_id=1,
        kafka_security=security,
    )  # fmt: skip
    assert ingest.run(config, lakehouse) == 0
    bronze = lakehouse.read("bronze.posts").select("post_id").collect()
    assert sorted(r.post_id for r in bronze) == sorted(ids)

    # the stream's source, drained once
    stream = StreamConfig(source="kafka", kafka_bootstrap=tls_kafka_broker.bootstrap,
                          kafka_topic=topic, kafka_security=security)  # fmt: skip
    query = (
        source(lakehouse.spark, stream)
        .writeStream.format("memory")
        .queryName(f"tls_{uuid.uuid4().hex[:8]}")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    lines = lakehouse.spark.sql(f"select line from {query.name}").collect()
    assert sorted(json.loads(r.line)["id"] for r in lines) == sorted(ids)


@pytest.mark.parametrize("client", ["plaintext", "wrong password"])
def test_a_client_without_the_credentials_is_refused(tls_kafka_broker, client):
    topic = f"posts-{uuid.uuid4().hex[:8]}"
    assert tls_kafka_broker.create_topic(topic, 1)
    right = _matcher(tls_kafka_broker)
    security = (
        KafkaSecurity()
        if client == "plaintext"
        else KafkaSecurity("SASL_SSL", "PLAIN", right.username, "not-it", right.ca_file)
    )
    with pytest.raises(InputDataError, match=f"at {tls_kafka_broker.bootstrap}"):
        ingest_kafka.topic_offsets(tls_kafka_broker.bootstrap, topic, security)


def test_every_setting_is_in_the_operations_table():
    from spark_jobs import kafka_security

    table = (ROOT / "docs" / "OPERATIONS.md").read_text()
    names = [v for k, v in vars(kafka_security).items() if k.startswith("ENV_")]
    assert "KAFKA_SECURITY_PROTOCOL" in names and "KAFKA_BOOTSTRAP" in names
    assert [name for name in names if f"`{name}`" not in table] == []


def test_the_topic_jobs_script_creates_the_topic_on_a_tls_sasl_listener(tls_kafka_broker, tmp_path):
    """prod's posts-topic Job, its own shell script run here with prod's KAFKA_* settings
    (the protocol and mechanism of s3tm-config, the Secret's user, the CA's file):
    kafka-topics.sh is the broker's TopicCommand from the resolved jars."""
    import shutil

    import yaml

    from spark_jobs.lake.jars import KAFKA_BROKER, classpath

    rendered = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / "infra" / "k8s" / "overlays" / "prod")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if shutil.which("kubectl") is None or rendered.returncode != 0:
        pytest.fail(f"kubectl kustomize: {rendered.stderr}")
    documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    config = next(d for d in documents if d["metadata"]["name"] == "s3tm-config")["data"]
    job = next(d for d in documents if d["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    tool = tmp_path / "kafka-topics.sh"
    tool.write_text(
        "#!/bin/sh\nexec java -cp '" + os.pathsep.join(classpath(KAFKA_BROKER))
        + "' org.apache.kafka.tools.TopicCommand \"$@\"\n"
    )  # fmt: skip
    tool.chmod(0o755)
    script = container["args"][0].replace("/opt/kafka/bin/kafka-topics.sh", str(tool))
    script = script.replace("/tmp/client.properties", str(tmp_path / "client.properties"))
    security = _matcher(tls_kafka_broker)
    topic = f"posts-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        **{k: v for k, v in config.items() if k.startswith("KAFKA_")},
        # the Secrets' part: the user, and the CA's file where this machine has it
        **{k: v for k, v in _env(security).items() if "USERNAME" in k or "PASSWORD" in k},
        "KAFKA_SSL_CA_FILE": str(security.ca_file),
        "KAFKA_BOOTSTRAP": tls_kafka_broker.bootstrap,
        "POSTS_TOPIC": topic,
        "POSTS_PARTITIONS": "3",
        "REPLICATION_FACTOR": "1",
    }
    # prod's own protocol and mechanism
    assert (env["KAFKA_SECURITY_PROTOCOL"], env["KAFKA_SASL_MECHANISM"]) == ("SASL_SSL", SCRAM)
    done = subprocess.run([*container["command"], script], env=env, capture_output=True,
                          text=True, check=False, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(tls_kafka_broker.end_offsets(topic)) == 3
