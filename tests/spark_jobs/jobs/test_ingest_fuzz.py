"""Generated bad input through ``ingest``: no crash, and every line read is accounted for:
rows in ``bronze.posts`` + rows in ``silver.posts_quarantine`` (each with a reason) = lines
in the landing files, over two batches (ids repeat within a file, across files and across
batches)."""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.jobs import ingest
from spark_jobs.lake.delta_io import Lakehouse

pytestmark = pytest.mark.spark

IDS = st.one_of(st.sampled_from(["a", "b", "c", "7", "x y"]), st.integers(0, 5))
WORDS = st.sampled_from(["white", "house", "vote", "Obama", "#news", "@bob", "https://t.co/x"])
TEXTS = st.lists(WORDS, min_size=1, max_size=6).map(" ".join)
TIMESTAMPS = st.sampled_from(
    [
        "2026-02-03T10:00:00Z",
        "Wed Oct 10 20:19:24 +0000 2018",
        "not a date",
        "2026-13-45T99:00:00",
        "+999999-01-01T00:00:00",
        "0000-00-00",
        "",
    ]
)
WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["k", "v"]), st.integers(), max_size=2),
)


@st.composite
def records(draw: st.DrawFn) -> bytes:
    """One line's bytes, good or bad in one of the ways a landing file can be."""
    record: dict[str, object] = {}
    if draw(st.booleans()):
        record["id"] = draw(st.one_of(IDS, WRONG)) if draw(st.booleans()) else draw(IDS)
    record["text"] = draw(TEXTS) if draw(st.integers(0, 4)) else draw(WRONG)
    if draw(st.booleans()):
        record["created_at"] = draw(st.one_of(TIMESTAMPS, WRONG))
    if draw(st.booleans()):  # unknown and nested fields
        record["user"] = {"name": "x", "tags": [1, {"deep": [None]}]}
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return b"{not json" + draw(st.binary(max_size=5)).replace(b"\n", b"").replace(b"\r", b"")
    if kind == 1:
        return json.dumps(draw(st.one_of(st.lists(st.integers()), st.integers(), TEXTS))).encode()
    if kind == 2:
        return json.dumps(record).encode()[:-1] + b"\xff\xfe}"  # invalid UTF-8
    if kind == 3:
        return b"\xef\xbb\xbf" + json.dumps(record).encode()  # byte-order mark
    if kind == 4:
        return draw(st.sampled_from([b"", b"   ", b"\t \x0b"]))  # blank lines
    return json.dumps(record, ensure_ascii=draw(st.booleans())).encode()


@st.composite
def landing_files(draw: st.DrawFn) -> list[bytes]:
    files = []
    for _ in range(draw(st.integers(1, 3))):
        lines = draw(st.lists(records(), min_size=0, max_size=12))
        ends = draw(
            st.lists(
                st.sampled_from([b"\n", b"\r\n", b"\r"]), min_size=len(lines), max_size=len(lines)
            )
        )
        body = b"".join(line + end for line, end in zip(lines, ends, strict=True))
        if draw(st.booleans()) and body:  # no final line break
            body = body[: -len(ends[-1])]
        files.append(body)
    return files


def _lines(content: bytes) -> int:
    pieces = re.split(rb"\r\n|\r|\n", content)
    return len(pieces) - (1 if pieces and pieces[-1] == b"" else 0)


COUNTER = itertools.count()


def _ingest(lakehouse: Lakehouse, landing: Path, batch: int) -> int:
    return ingest.run(
        argparse.Namespace(
            landing=str(landing),
            pattern="*.jsonl*",
            batch_id=batch,
            default_day=dt.date(2026, 2, 1),
        ),
        lakehouse,
    )


@settings(
    max_examples=12,
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
                lines += _lines(content)
            assert _ingest(lakehouse, landing, batch) == 0
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
    assert _ingest(lakehouse, landing, 1) == 0
    quarantine = lakehouse.read_arrow("silver.posts_quarantine").to_pylist()
    assert [r["post_id"] for r in lakehouse.read_arrow("bronze.posts").to_pylist()] == ["ok"]
    assert len(quarantine) == 1 and quarantine[0]["reason"].startswith("oversized text")
