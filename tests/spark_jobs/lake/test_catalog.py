"""The lakehouse's tables in a Hive Metastore (``S3TM_CATALOG_URI``): a real metastore
server, the chain run as a user runs it (``s3tm pipeline``), then another Spark session
on the same metastore reads the tables by name and finds what delta-rs reads at their
locations. Registering is idempotent, and never re-points a name at another lakehouse."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from core.corpus.synthetic import SyntheticCorpusSpec
from spark_jobs.lake.corpus_files import write_demo_corpus
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.routing_store import published_version
from tests.support.metastore import hive_metastore


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

    # `s3tm sql` on the catalog: the names, no path
    sql = _s3tm(
        env,
        "sql",
        "--format",
        "json",
        "SELECT routing_version FROM routing.versions WHERE status = 'published'",
    )
    assert sql.returncode == 0, sql.stderr[-3000:]
    assert "Spark SQL on the catalog" in sql.stderr
    assert [json.loads(line)["routing_version"] for line in sql.stdout.splitlines()] == [
        published_version(store)
    ]
    time_travel = _s3tm(env, "sql", "--as-of", "routing.versions=1", "SELECT 1")
    assert time_travel.returncode == 2 and "VERSION AS OF" in time_travel.stderr

    # a second lakehouse on the same metastore may not take over the first one's names
    other = tmp_path / "other"
    write_demo_corpus(other / "landing" / "posts.jsonl", SyntheticCorpusSpec(n_posts=200, seed=6))
    refused = _s3tm(
        env, "ingest", "--landing", str(other / "landing"), "--lakehouse", str(other / "lake")
    )
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "is at" in refused.stderr and "not at this lakehouse's" in refused.stderr
    assert Path(other / "lake" / "bronze" / "posts").is_dir()  # its own tables are written


def test_tables_on_s3_register_through_a_metastore_that_reads_s3(
    s3_endpoint, spark_process_env, tmp_path, monkeypatch
):
    """The deployed shape: lakehouse on S3 (compose's MinIO), ``s3tm metastore``'s server
    with the same S3 variables; the ingest registers its tables, a query reads them by
    name."""
    import json

    import boto3

    from tests.conftest import s3_environment

    s3 = s3_environment(s3_endpoint)
    for key, value in s3.items():  # delta-rs in this process reads the same variables
        monkeypatch.setenv(key, value)
    boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=s3["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=s3["AWS_SECRET_ACCESS_KEY"],
        region_name=s3["AWS_REGION"],
    ).create_bucket(Bucket="s3tm-catalog")
    landing = tmp_path / "landing"
    write_demo_corpus(landing / "posts.jsonl", SyntheticCorpusSpec(n_posts=300, seed=7))
    env = {**spark_process_env, **s3, "S3TM_STATE_DIR": str(tmp_path / "state")}
    lake = "s3://s3tm-catalog/main"
    with hive_metastore(tmp_path / "metastore", env) as uri:
        env["S3TM_CATALOG_URI"] = uri
        ran = _s3tm(env, "ingest", "--landing", str(landing), "--lakehouse", lake)
        assert ran.returncode == 0, ran.stderr[-3000:]
        read = subprocess.run(
            [
                sys.executable,
                "-c",
                "import json\nfrom spark_jobs.lake.session import build_session\n"
                "spark = build_session('q')\n"
                "print(json.dumps([spark.sql('SELECT count(*) AS n FROM bronze.posts')"
                ".collect()[0].n, [r.data_type for r in spark.sql("
                "'DESCRIBE TABLE EXTENDED bronze.posts').collect() if r.col_name == 'Location'],"
                "[r.info_value for r in spark.sql('DESCRIBE DATABASE bronze').collect()"
                " if r.info_name == 'Location']]))",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert read.returncode == 0, read.stderr[-3000:]
    count, location, database = json.loads(read.stdout.strip().splitlines()[-1])
    assert count == Lakehouse(None, lake, engine="rs").row_count("bronze.posts") > 0
    assert location == ["s3a://s3tm-catalog/main/bronze/posts"]
    # the database's folder is in the lakehouse, not on the machine of whoever asked first
    assert database == ["s3a://s3tm-catalog/main/_catalog/bronze.db"]
