"""Generated bad input through ``ingest``: no crash, and every line read is accounted for:
rows in ``bronze.posts`` + rows in ``silver.posts_quarantine`` (each with a reason) = lines
in the landing files, over two batches (ids repeat within a file, across files and across
batches)."""

from __future__ import annotations

import itertools
import json
import shutil

from hypothesis import HealthCheck, given, settings

from spark_jobs.lake.delta_io import Lakehouse
from tests.hypothesis_tiers import examples
from tests.json_lines_strategies import count_lines, landing_files
from tests.support.ingest import ingest_landing

COUNTER = itertools.count()


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(first=landing_files(), second=landing_files())
def test_every_line_is_bronze_or_quarantined(spark, tmp_path, first, second):
    root = tmp_path / f"case-{next(COUNTER)}"
    lakehouse = Lakehouse(spark, root / "lakehouse")
    landing = root / "landing"
    landing.mkdir(parents=True)
    try:
        lines = 0
        for batch, files in ((1, first), (2, second)):
            for k, content in enumerate(files):
                (landing / f"b{batch}-{k}.jsonl").write_bytes(content)
                lines += count_lines(content)
            assert ingest_landing(lakehouse, landing, batch) == 0
        bronze = lakehouse.row_count("bronze.posts")
        quarantine = lakehouse.read_arrow("silver.posts_quarantine")
        assert bronze + quarantine.num_rows == lines
        assert all(reason for reason in quarantine["reason"].to_pylist())
        ids = lakehouse.read_arrow("bronze.posts")["post_id"].to_pylist()
        assert len(ids) == len(set(ids)), "a post id ingested twice"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_line_of_several_megabytes_is_quarantined(lakehouse, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    huge = json.dumps({"id": "big", "text": "word " * 1_000_000}).encode()
    (landing / "big.jsonl").write_bytes(
        huge + b"\n" + json.dumps({"id": "ok", "text": "hi there"}).encode()
    )
    assert ingest_landing(lakehouse, landing, 1) == 0
    quarantine = lakehouse.read_arrow("silver.posts_quarantine").to_pylist()
    assert [r["post_id"] for r in lakehouse.read_arrow("bronze.posts").to_pylist()] == ["ok"]
    assert len(quarantine) == 1 and quarantine[0]["reason"].startswith("oversized text")
