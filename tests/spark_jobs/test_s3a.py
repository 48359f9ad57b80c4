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
