"""Spark's own S3A against an S3-compatible server on loopback (moto): the whole remap chain
with its landing and lakehouse on ``s3://`` equals a local run row for row, and a streaming
micro-batch reading ``s3a://`` landing files with its checkpoint there matches brute force.
Spark writes Parquet through S3A; every commit is delta-rs' conditional put."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.text import normalize
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.subscription_store import active_subscriptions
from tests.conftest import s3_environment
from tests.spark_jobs.conftest import REFERENCE_NODES, register_reference_subscriptions
from tests.spark_jobs.conftest import posts_of as _posts
from tests.spark_jobs.test_standalone_cluster import _stable

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "s3tm-s3a"


@pytest.fixture
def s3_env(s3_endpoint, spark_process_env, monkeypatch, tmp_path) -> dict[str, str]:
    import boto3

    env = {**s3_environment(s3_endpoint), "S3TM_STATE_DIR": str(tmp_path / "state")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3")
    if BUCKET not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=BUCKET)
    return {**spark_process_env, **env, "S3TM_SPARK_LOG_LEVEL": "ERROR"}


def _s3tm(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [sys.executable, "-m", "s3tm.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return run


def _upload(local: Path, key: str) -> str:
    import boto3

    boto3.client("s3").upload_file(str(local), BUCKET, key)
    return f"s3://{BUCKET}/{key}"


def test_remap_chain_and_a_stream_batch_on_s3a_equal_a_local_run(s3_env, reference_chain, tmp_path):
    corpus = reference_chain.corpus  # the local run: the worker's reference chain
    landing = _upload(corpus, f"{tmp_path.name}/landing/demo.jsonl.gz").rsplit("/", 1)[0]
    on_s3 = f"s3a://{BUCKET}/{tmp_path.name}/lake"  # Spark's spelling is accepted too
    register_reference_subscriptions(on_s3, reference_chain.phrases)
    _s3tm(
        s3_env, "pipeline", "--master", "local[2]", "--lakehouse", on_s3,
        "--landing", landing, "--batch-id", "1", "--nodes", str(REFERENCE_NODES),
        "--no-cooccurrence",
    )  # fmt: skip
    remote = Lakehouse(None, on_s3, engine="rs")
    local = Lakehouse(None, reference_chain.lakehouse, engine="rs")
    assert remote.remote and remote.location.startswith("s3://")
    for name, key in (
        ("bronze.posts", ["post_id"]),
        ("silver.posts", ["post_id"]),
        ("gold.post_words", ["post_id", "word"]),
        ("gold.word_stats", ["day", "word"]),
        ("routing.mappings", ["word", "part"]),
    ):
        rows = _stable(remote.read_arrow(name), key)
        assert rows and rows == _stable(local.read_arrow(name), key), name
    assert [r["status"] for r in remote.read_arrow("routing.versions").to_pylist()] == ["published"]

    # a streaming micro-batch: landing and checkpoint on s3a://, matches = brute force
    stream_landing = _upload(corpus, f"{tmp_path.name}/stream/posts.jsonl.gz").rsplit("/", 1)[0]
    streamed = _s3tm(
        s3_env, "stream", "--master", "local[2]", "--lakehouse", on_s3, "run",
        "--landing", stream_landing.replace("s3://", "s3a://"), "--available-now",
        "--checkpoint", f"s3a://{BUCKET}/{tmp_path.name}/checkpoint",
    )  # fmt: skip
    subs = {r["sub_id"]: set(r["words"]) for r in active_subscriptions(remote)}
    expected = {
        (p["id"], sub)
        for p in _posts(corpus)
        for sub, ws in subs.items()
        if ws <= set(normalize(p["text"]))
    }
    matches = remote.read_arrow("matches")
    got = list(zip(matches["post_id"].to_pylist(), matches["sub_id"].to_pylist(), strict=True))
    assert expected and len(got) == len(set(got)) and set(got) == expected
    # the shedding controller's backlog was read from the s3a:// checkpoint and landing
    assert "backlog not measured" not in streamed.stderr, streamed.stderr[-2000:]


# A Spark session writing and reading s3a:// with whatever credentials its environment holds.
IDENTITY_PROBE = """
import sys
from spark_jobs.lake.session import build_session

spark = build_session("s3tm-identity", master="local[1]")
path = sys.argv[1]
spark.range(5).write.mode("overwrite").parquet(path)
print("ROWS", spark.read.parquet(path).count())
"""


@pytest.mark.parametrize("token", [True, False], ids=["web identity", "no credentials"])
def test_s3a_takes_the_pods_web_identity_when_no_keys_are_set(
    s3_endpoint, spark_process_env, tmp_path, token
):
    """IRSA's way: no keys in the environment, a web identity token and a role. S3A's chain
    (spark_jobs/lake/session.py) trades the token for temporary keys at STS (the S3 server's
    STS here, through AWS_ENDPOINT_URL) and writes and reads with them; without the token
    no provider has credentials and the write fails, saying so."""
    import boto3

    env = {**spark_process_env, **s3_environment(s3_endpoint), "S3TM_SPARK_LOG_LEVEL": "ERROR"}
    boto3.client(
        "s3", endpoint_url=s3_endpoint, aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=env["AWS_REGION"],
    ).create_bucket(Bucket="s3tm-identity")  # fmt: skip
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        env.pop(key, None)
    if token:
        (tmp_path / "token").write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzM3RtIn0.c2lnbmF0dXJl")
        env["AWS_WEB_IDENTITY_TOKEN_FILE"] = str(tmp_path / "token")
        env["AWS_ROLE_ARN"] = "arn:aws:iam::123456789012:role/s3tm-lakehouse"
        env["AWS_ROLE_SESSION_NAME"] = "s3tm-test"
    done = subprocess.run(
        [sys.executable, "-c", IDENTITY_PROBE, f"s3a://s3tm-identity/{tmp_path.name}"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    if token:
        assert done.returncode == 0 and "ROWS 5" in done.stdout, done.stderr[-3000:]
    else:
        assert done.returncode != 0
        assert "credentials" in done.stderr.lower(), done.stderr[-3000:]
