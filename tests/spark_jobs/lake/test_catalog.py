"""The lakehouse's tables in a Hive Metastore (``S3TM_CATALOG_URI``): a real metastore
server, the chain run as a user runs it (``s3tm pipeline``), then another Spark session
on the same metastore reads the tables by name and finds what delta-rs reads at their
locations. Registering is idempotent, and never re-points a name at another lakehouse."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.corpus.synthetic import SyntheticCorpusSpec
from spark_jobs.lake.corpus_files import write_demo_corpus
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.routing_store import published_version
from tests.support.metastore import hive_metastore


@pytest.fixture(scope="module")
def metastore(tmp_path_factory: pytest.TempPathFactory):
    with hive_metastore(tmp_path_factory.mktemp("metastore")) as uri:
        yield uri


def _s3tm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "s3tm.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


# another team's Spark SQL on the metastore: tables by name, no path anywhere
QUERY = textwrap.dedent(
    """
    import json
    from spark_jobs.lake.session import build_session
    spark = build_session("a-team-query")
    published = spark.sql(
        "SELECT routing_version FROM routing.versions WHERE status = 'published'"
    ).collect()
    posts = spark.sql("SELECT count(*) AS n FROM silver.posts").collect()[0].n
    tables = sorted(
        f"{t.namespace}.{t.tableName}"
        for db in ("bronze", "silver", "gold", "routing")
        for t in spark.sql(f"SHOW TABLES IN {db}").collect()
    )
    print(json.dumps({"published": [r.routing_version for r in published], "posts": posts,
                      "tables": tables}))
    """
)


def test_a_team_reads_the_published_version_by_name_through_the_catalog(
    metastore, spark_process_env, tmp_path
):
    import json

    landing, lake = tmp_path / "landing", tmp_path / "lakehouse"
    write_demo_corpus(landing / "posts.jsonl", SyntheticCorpusSpec(n_posts=800, seed=5), days=2)
    env = {**spark_process_env, "S3TM_CATALOG_URI": metastore}
    ran = _s3tm(
        env, "pipeline", "--landing", str(landing), "--lakehouse", str(lake), "--nodes", "4"
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    # again: every table is registered already, at the same place
    again = _s3tm(env, "graph", "--lakehouse", str(lake))
    assert again.returncode == 0, again.stderr[-3000:]

    read = subprocess.run(
        [sys.executable, "-c", QUERY], env=env, capture_output=True, text=True, timeout=600
    )
    assert read.returncode == 0, read.stderr[-3000:]
    found = json.loads(read.stdout.strip().splitlines()[-1])
    store = Lakehouse(None, lake, engine="rs")
    assert found["published"] == [published_version(store)]
    assert found["posts"] == store.row_count("silver.posts") > 0
    assert {"routing.versions", "routing.mappings", "silver.posts", "gold.post_words"} <= set(
        found["tables"]
    )

    # a second lakehouse on the same metastore may not take over the first one's names
    other = tmp_path / "other"
    write_demo_corpus(other / "landing" / "posts.jsonl", SyntheticCorpusSpec(n_posts=200, seed=6))
    refused = _s3tm(
        env, "ingest", "--landing", str(other / "landing"), "--lakehouse", str(other / "lake")
    )
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "is at" in refused.stderr and "not at this lakehouse's" in refused.stderr
    assert Path(other / "lake" / "bronze" / "posts").is_dir()  # its own tables are written
