"""A small lakehouse with every table the platform writes, built by the demo path's jobs:
ingest (with bad lines), normalise, subscriptions of two subscribers, the remap chain twice
(versions 1 and 2, version 2 published over 1, then a third candidate left unpublished),
and the streaming matcher over two landed files. For the SQL tests."""

from __future__ import annotations

import datetime as dt
import fcntl
import gzip
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from core.corpus.synthetic import SyntheticCorpusSpec
from spark_jobs.jobs import ingest, normalise
from spark_jobs.jobs.publish import publish
from spark_jobs.lake.corpus_files import write_demo_corpus
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.subscription_store import add_subscriptions
from spark_jobs.stream.config import StreamConfig
from spark_jobs.stream.matcher import start
from tests.spark_jobs.jobs.chain import run_chain

BAD_LINES = b'{broken\n{"id":"q1","text":"  "}\n\xff\xfe\n'
# the first worker to ask builds the lakehouse once per run; the other waits this long
SHARED_BUILD_TIMEOUT_S = 900


def build(spark: Any, root: Path) -> Lakehouse:
    lakehouse = Lakehouse(spark, root / "lakehouse")
    landing = root / "landing"
    write_demo_corpus(
        landing / "demo.jsonl.gz", SyntheticCorpusSpec(n_posts=1200, n_words=800, seed=4), days=3
    )
    (landing / "bad.jsonl").write_bytes(BAD_LINES)
    assert (
        ingest.run(
            ingest.IngestConfig(
                landing=str(landing),
                pattern="*.jsonl*",
                batch_id=1,
                default_day=dt.date(2026, 2, 1),
            ),
            lakehouse,
        )
        == 0
    )
    assert normalise.run(normalise.NormaliseConfig(sample_rate=1.0, seed=0), lakehouse) == 0
    rows = lakehouse.read("silver.posts").orderBy("post_id").limit(60).collect()
    add_subscriptions(lakehouse, [" ".join(r.words[:2]) for r in rows[:40]], "alice")
    add_subscriptions(lakehouse, [" ".join(r.words[:1]) for r in rows[40:]], "bob")
    # margin -1: publish whatever validates (the tests want two published versions)
    assert run_chain(lakehouse, landing, nodes=8, margin=-1.0, batch=2) == 0
    assert run_chain(lakehouse, landing, nodes=4, margin=-1.0, batch=3) == 0
    for version in (1, 2):  # in order, whatever the margin decided
        publish(lakehouse, version, skip_validation=True)
    # the stream: the demo posts again (fresh ids), one file per micro-batch, plus bad lines
    stream_landing = root / "stream-landing"
    stream_landing.mkdir()
    with gzip.open(landing / "demo.jsonl.gz", "rb") as posts:
        lines = posts.read().splitlines()[:600]
    for k in range(2):
        part = [line.replace(b'"id": "', f'"id": "s{k}-'.encode(), 1) for line in lines[k::2]]
        (stream_landing / f"posts-{k}.jsonl").write_bytes(b"\n".join(part) + b"\n" + BAD_LINES)
    query, _ = start(
        spark,
        lakehouse,
        StreamConfig(
            source="files",
            landing=str(stream_landing),
            checkpoint=str(root / "checkpoint"),
            query_name="sql_fixture",
            max_files_per_trigger=1,
            trigger_seconds=0.0,
            available_now=False,
            seed=0,
        ),
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    shutil.rmtree(landing)
    return lakehouse


def shared_copy(spark: Any, tmp_path_factory: pytest.TempPathFactory, name: str) -> Lakehouse:
    """A copy of one lakehouse :func:`build` made once per run for every test worker (the
    SQL and Prometheus tests read the same tables: built twice, it was 35 s of a 2-core
    suite twice), in a folder of the test's own. The workers' temporary folders share a
    parent per run, where the first builds under an exclusive lock while the other waits."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "sql-lakehouse"
    done = shared / "built"
    with open(f"{shared}.lock", "w") as lock:
        deadline = time.monotonic() + SHARED_BUILD_TIMEOUT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the other test worker's build of {shared} did not finish in "
                        f"{SHARED_BUILD_TIMEOUT_S} s"
                    ) from None
                time.sleep(0.5)
        if not done.is_file():  # a build that failed midway is started again
            shutil.rmtree(shared, ignore_errors=True)
            build(spark, shared)
            done.write_text("")
    copy = tmp_path_factory.mktemp(name) / "lakehouse"
    shutil.copytree(shared / "lakehouse", copy)
    return Lakehouse(spark, copy)


if __name__ == "__main__":  # a lakehouse to try queries on: python -m tests.s3tm.sql_lakehouse DIR
    import sys

    from spark_jobs.lake.session import build_session

    target = Path(sys.argv[1])
    build(build_session("sql-fixture", master="local[2]"), target)
    print(f"S3TM_LAKEHOUSE={target / 'lakehouse'}")
