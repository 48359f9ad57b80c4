"""``s3tm airflow`` on PostgreSQL with the LocalExecutor (the production setting): runs
``s3tm_remap`` end to end on a throw-away PostgreSQL cluster (Debian's server binaries;
.ci/run installs them). Its own file, so a worker runs it beside the UI tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.s3tm.airflow_support import AirflowApi, free_port, start_airflow


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A throw-away PostgreSQL cluster on loopback (Debian's server binaries)."""
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    if not bins:
        pytest.skip(
            "PostgreSQL server is absent (Debian package 'postgresql'; .ci/run installs it)"
        )
    bin_dir = bins[-1]
    # Not under pytest's tmp dir: its parents are private to root, and the server runs as
    # the postgres user.
    base = Path(tempfile.mkdtemp(prefix="s3tm-pg-"))
    data = base / "data"
    port = free_port()
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        shutil.chown(base, "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*as_postgres, str(bin_dir / "initdb"), "-D", str(data), "-U", "airflow", "-A", "trust"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_postgres,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(data.parent / "log"),
            "-o",
            f"-p {port} -k {data.parent} -c listen_addresses=127.0.0.1",
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [
                str(bin_dir / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "airflow",
                "airflow",
            ],
            check=True,
            capture_output=True,
        )
        yield f"postgresql+psycopg2://airflow@127.0.0.1:{port}/airflow"
    finally:
        subprocess.run(
            [*as_postgres, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


def test_remap_on_postgresql_with_the_local_executor(postgres_url, spark_process_env, tmp_path):
    for airflow in start_airflow(
        tmp_path, free_port(), "--database-url", postgres_url, base_env=spark_process_env
    ):
        api: AirflowApi = airflow["api"]
        assert "metadata database: postgresql" in airflow["printed"]
        ingest = api.trigger("s3tm_ingest")
        assert api.wait_for("s3tm_ingest", ingest) == "success"
        remap = api.trigger("s3tm_remap", {"nodes": 4})
        assert api.wait_for("s3tm_remap", remap) == "success", api.failed_tasks("s3tm_remap", remap)
        report = (tmp_path / "lakehouse" / "reports").glob("remap-*.md")
        assert any('"published": ' in p.read_text() for p in report)
