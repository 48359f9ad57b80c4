"""Spark's own S3A against an S3-compatible server on loopback (moto): the whole remap chain
with its landing and lakehouse on ``s3://`` equals a local run row for row, and a streaming
micro-batch reading ``s3a://`` landing files with its checkpoint there matches brute force.
Spark writes Parquet through S3A; every commit is delta-rs' conditional put."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.corpus.synthetic import SyntheticCorpusSpec, write_demo_corpus
from core.text import normalize
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.subscription_store import active_subscriptions, add_subscriptions
from tests.conftest import s3_environment
from tests.spark_jobs.test_standalone_cluster import _posts, _stable

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


def test_remap_chain_and_a_stream_batch_on_s3a_equal_a_local_run(s3_env, tmp_path):
    corpus = tmp_path / "demo.jsonl.gz"
    write_demo_corpus(corpus, SyntheticCorpusSpec(n_posts=2500, n_words=1200, seed=9), days=2)
    landing = _upload(corpus, f"{tmp_path.name}/landing/demo.jsonl.gz").rsplit("/", 1)[0]
    local_landing = tmp_path / "landing"
    local_landing.mkdir()
    (local_landing / "demo.jsonl.gz").write_bytes(corpus.read_bytes())
    on_s3 = f"s3a://{BUCKET}/{tmp_path.name}/lake"  # Spark's spelling is accepted too
    on_disk = tmp_path / "local-lake"
    texts = [post["text"] for post in _posts(corpus)]
    phrases = [" ".join(normalize(t)[:2]) for t in texts[:40:4] if normalize(t)]
    for root in (on_s3, on_disk):
        add_subscriptions(Lakehouse(None, root, engine="rs"), phrases, "alice")
    for root, source in ((on_s3, landing), (str(on_disk), str(local_landing))):
        _s3tm(
            s3_env, "pipeline", "--master", "local[2]", "--lakehouse", root,
            "--landing", source, "--batch-id", "1", "--nodes", "8", "--no-cooccurrence",
        )  # fmt: skip

    remote, local = Lakehouse(None, on_s3, engine="rs"), Lakehouse(None, on_disk, engine="rs")
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
    _s3tm(
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
