"""Shared fixtures (a small local SparkSession, the real-data path) and the test tiers.

Tiers: a test's markers follow from the fixtures it uses, directly or through other fixtures
(``RESOURCE_FIXTURES``), never from a hand-written mark. ``make check`` deselects every test
that reaches a resource and runs with ``S3TM_TEST_TIER=check``: any JVM started anyway (in
this process or a child) fails at once, so a test that starts Spark without asking for it
by fixture cannot hide in the quick tier.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from benchmarks.realdata import real_corpus_path
from tests.scheduling import file_seconds, order_longest_first
from tests.scheduling import pytest_addoption as pytest_addoption
from tests.scheduling import pytest_configure as configure_scheduling

# `pytest --cpu-report FILE`: each test phase's CPU seconds (tests/cpu_accounting.py);
# each xdist worker in a CPU cgroup of its own, equal shares (tests/cpu_shares.py)
pytest_plugins = ["tests.cpu_accounting", "tests.cpu_shares"]

# fixture -> the marker of the resource it starts (markers are declared in pyproject.toml)
RESOURCE_FIXTURES: dict[str, str] = {
    "spark": "spark",  # an in-process local SparkSession (JVM)
    "spark_process_env": "spark",  # Spark started by a child process (the CLI, spark-submit)
    "cluster": "spark",  # a Spark standalone master and workers
    "metastore": "spark",  # a Hive Metastore (a JVM) on loopback
    "airflow_process_env": "airflow",  # `airflow` commands with a metadata database
    "airflow_ui": "airflow",  # `s3tm airflow` (scheduler, API server)
    "chromium": "browser",  # headless Chromium driven by Playwright
    "postgres_url": "postgres",  # a PostgreSQL server on loopback
    "s3_endpoint": "s3",  # an S3-compatible server on loopback
    "kafka_broker": "kafka",  # a Kafka broker (KRaft) on loopback, from the resolved jars
    "tls_kafka_broker": "kafka",  # the same with a SASL_SSL listener (test_kafka_security.py)
    "real_corpus": "realdata",  # ../shared/data
    "platform_image": "container",  # containers of the platform image (make test-containers)
    "kube_apiserver": "kubernetes",  # kube-apiserver built here, on etcd (make k8s-check)
}
CHECK_TIER = os.environ.get("S3TM_TEST_TIER") == "check"
# Where the check tier points JAVA_HOME: the path is the error message a stray JVM prints.
NO_JVM_HOME = "/nonexistent/S3TM_TEST_TIER=check-starts-no-JVM--ask-for-the-spark-fixture"

# Hypothesis: fewer examples in the quick tier, the tests' own counts (or more) in CI.
settings.register_profile(
    "check", max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "check" if CHECK_TIER else "ci"))

if CHECK_TIER:
    os.environ["JAVA_HOME"] = NO_JVM_HOME


def pytest_configure(config: pytest.Config) -> None:
    """Scheduling options; and the Spark drivers this run starts (here and in children) get
    the quick start-up options of ``tests/jvm_startup.py``: xdist's controller writes the
    class archive once per machine, its workers find it."""
    configure_scheduling(config)
    if CHECK_TIER or "S3TM_TEST_JVM_OPTIONS" in os.environ:
        return
    from tests import jvm_startup

    controller = not hasattr(config, "workerinput")
    archive = jvm_startup.ensure_archive() if controller else jvm_startup.archive_path()
    options = jvm_startup.driver_options(archive if archive and archive.is_file() else None)
    os.environ["S3TM_TEST_JVM_OPTIONS"] = options  # once: a worker inherits, keeps it
    os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {options}".strip()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each test by the resources its fixtures start; queues the longest files first
    (``tests/scheduling.py``)."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker in sorted({m for f, m in RESOURCE_FIXTURES.items() if f in used}):
            item.add_marker(getattr(pytest.mark, marker))
    order_longest_first(items, file_seconds())


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local[2] SparkSession from the jobs' builder: UI off, few shuffle partitions."""
    from spark_jobs.lake.session import build_session

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = build_session(
        "s3tm-tests",
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.warehouse.dir": str(warehouse),
            "spark.driver.memory": "1g",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_process_env() -> dict[str, str]:
    """The environment of a child process that starts Spark (the CLI, spark-submit): this
    interpreter for the Python workers, a small driver."""
    return {
        **os.environ,
        "S3TM_DRIVER_MEMORY": "1g",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


@pytest.fixture()
def lakehouse(spark: Any, tmp_path: Path):
    """An empty lakehouse under a tmp dir, with the engine the session supports."""
    from spark_jobs.lake.delta_io import Lakehouse

    return Lakehouse(spark, tmp_path / "lakehouse")


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium for the browser tests; skips with a message when absent."""
    import shutil

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("Chromium is absent (Debian package 'chromium'; .ci/run installs it)")
    return path


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An S3-compatible server (moto's, from PyPI) on a loopback port it chose: conditional
    puts and all that delta-rs, pyarrow and S3A use."""
    from tests.support.s3_server import LocalS3

    server = LocalS3(log=tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Hive Metastore server on loopback (``s3tm metastore``'s): its thrift:// URI."""
    from tests.support.metastore import hive_metastore

    with hive_metastore(tmp_path_factory.mktemp("metastore")) as uri:
        yield uri


def s3_environment(endpoint: str) -> dict[str, str]:
    """The variables every engine reads an S3 endpoint and its credentials from (the same
    names the deployment sets)."""
    return {
        "AWS_ACCESS_KEY_ID": "s3tm-test",
        "AWS_SECRET_ACCESS_KEY": "s3tm-test-secret",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
    }


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A Kafka broker (KRaft, one node) from the jars `make setup` resolved, on a port it
    chose; tests make their own topics. Fails (not skips) when the jars are missing: CI has
    them. One per file, stopped after it: an idle broker takes 2-3 s of CPU a minute, and a
    session's broker idled from the first Kafka file to the worker's end (10-17 minutes);
    a start costs about 4 s."""
    from devtools.local.kafka_broker import BrokerSettings, KafkaBroker

    folder = tmp_path_factory.mktemp("kafka")
    broker = KafkaBroker(BrokerSettings(folder=folder, port=0))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def real_corpus() -> Path:
    """The real tweets of ../shared/data; skips with a message when absent."""
    path = real_corpus_path()
    if path is None:
        pytest.skip(
            "real corpus ../shared/data/tweets-tweeteval.jsonl.gz is absent "
            "(set S3TM_SHARED_DATA to its folder to run this test)"
        )
    return path


@pytest.fixture(scope="session")
def container_engine() -> list[str]:
    """podman (with the project's containers.conf) or, where podman is absent, docker."""
    import shutil

    if shutil.which("podman"):
        os.environ.setdefault(
            "CONTAINERS_CONF",
            str(Path(__file__).resolve().parents[1] / "docker/local/containers.conf"),
        )
        return ["podman"]
    if shutil.which("docker"):
        return ["docker"]
    pytest.fail("neither podman nor docker is installed: `make test-containers` installs podman")


@pytest.fixture(scope="session")
def platform_image(container_engine: list[str]) -> str:
    """The image `make image` built (S3TM_IMAGE, version from pyproject.toml)."""
    import subprocess
    import tomllib

    version = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())[
        "project"
    ]["version"]
    image = f"{os.environ.get('S3TM_IMAGE', 's3tm/platform')}:{version}"
    found = subprocess.run([*container_engine, "image", "inspect", image], capture_output=True)
    if found.returncode != 0:
        pytest.fail(f"no image {image}: run `make image` first")
    return image


@pytest.fixture(scope="session")
def kube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """kube-apiserver (built here, once per machine) on etcd, the CRDs installed."""
    from tests.deploy.kube_apiserver import KubeApiServer

    server = KubeApiServer(tmp_path_factory.mktemp("kube-apiserver"))
    try:
        yield server.start()
    finally:
        server.stop()
