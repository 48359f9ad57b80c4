"""DAG integrity (every DAG imports, has tags, owner, retries, docs; parsing touches no
database) and an end-to-end `airflow dags test` of both DAGs on a small generated corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
AIRFLOW = Path(sys.executable).with_name("airflow")


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
                {
                    "conn_type": "spark",
                    "host": "local[2]",
                    "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"},
                }
            ),
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "S3TM_TASK_RETRIES": "0",
            "S3TM_DRIVER_MEMORY": "1g",
            **extra,
        }
    )
    return env


def test_dag_integrity_without_a_database(tmp_path):
    # A database URL that cannot be opened: parsing must not need it.
    env = _env(
        tmp_path / "home",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=(f"sqlite:///{tmp_path}/missing/dir/airflow.db"),
    )
    code = textwrap.dedent("""
        import json
        from airflow.models.dagbag import DagBag
        bag = DagBag(dag_folder=%r)
        print(json.dumps({"errors": {k: str(v)[:300] for k, v in bag.import_errors.items()},
                          "dags": {d.dag_id: {"tags": sorted(d.tags), "doc": bool(d.doc_md),
                                              "owners": sorted({t.owner for t in d.tasks}),
                                              "retries": sorted({t.retries for t in d.tasks}),
                                              "tasks": len(d.tasks)}
                                   for d in bag.dags.values()}}))
    """) % str(REPO / "dags")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}
    assert set(result["dags"]) == {"s3tm_ingest", "s3tm_remap"}
    for dag in result["dags"].values():
        assert dag["doc"] and "s3tm" in dag["tags"] and dag["tasks"] >= 2
        assert dag["owners"] == ["s3tm-platform"]
    assert not (tmp_path / "missing").exists()


@pytest.mark.spark
def test_remap_end_to_end_with_airflow_dags_test(tmp_path):
    from core.corpus.synthetic import SyntheticCorpusSpec, write_demo_corpus

    home, lakehouse, landing = tmp_path / "home", tmp_path / "lakehouse", tmp_path / "landing"
    write_demo_corpus(
        landing / "posts.jsonl.gz", SyntheticCorpusSpec(n_posts=1500, n_words=1500, seed=9), days=2
    )
    env = _env(home, S3TM_LAKEHOUSE=str(lakehouse), S3TM_LANDING=str(landing))

    def airflow(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(AIRFLOW), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
        )

    assert airflow("db", "migrate").returncode == 0
    ingest = airflow("dags", "test", "s3tm_ingest", "2026-01-01T00:00:00+00:00")
    assert "state=success" in ingest.stdout + ingest.stderr, ingest.stderr[-3000:]
    remap = airflow("dags", "test", "s3tm_remap", "2026-01-02T02:00:00+00:00")
    assert "state=success" in remap.stdout + remap.stderr, remap.stderr[-3000:]

    from spark_jobs.delta_io import Lakehouse
    from spark_jobs.routing_store import published_version, versions

    store = Lakehouse(None, lakehouse, engine="rs")
    first = published_version(store)
    assert first is not None
    metrics = json.loads(versions(store)[-1]["metrics"])
    assert metrics["evaluation"]["posts"] > 0
    assert list((lakehouse / "reports").glob("remap-*.md"))
    assert (
        lakehouse / "_quality" / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    ).is_file()

    # A worse candidate (hash, no split) with a margin: the published version stays.
    worse = airflow(
        "dags",
        "test",
        "s3tm_remap",
        "2026-01-03T02:00:00+00:00",
        "--conf",
        json.dumps({"algorithm": "hash", "split": False, "margin": 0.05}),
    )
    assert "state=success" in worse.stdout + worse.stderr, worse.stderr[-3000:]
    assert published_version(store) == first
    report = sorted((lakehouse / "reports").glob("remap-*.md"))[-1].read_text()
    assert "below the required" in report
