"""The learn job reads its edges on the driver (pyarrow + core's xxhash64), not through
Spark: the selection must be exactly Spark's, hash for hash and edge for edge."""

from __future__ import annotations

import datetime as dt
import random
import string
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from core.corpus.edges import training_corpus
from core.sampling.hash_fraction import hash_fraction_mask, spark_xxhash64
from spark_jobs.jobs import learn
from spark_jobs.jobs.sampling import hash_fraction_filter, holdout_filter

ALPHABET = string.ascii_letters + string.digits + "_-:é€😀 \t"


def _ids(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    fixed = ["", "a", "1234", "12345678", "x" * 31, "y" * 32, "z" * 33, "é" * 40]
    return fixed + [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 90))) for _ in range(n)
    ]


def test_core_hash_is_sparks_xxhash64_and_selects_the_same_posts(spark):
    ids = _ids(3000, 1)
    frame = spark.createDataFrame([(i,) for i in ids], "post_id string")
    rows = frame.select(
        F.xxhash64(F.lit(7), F.col("post_id")).alias("h"),
        holdout_filter(0.2).alias("held"),
        hash_fraction_filter(0.35, 11).alias("sampled"),
    ).collect()
    array = pa.array(ids)
    assert spark_xxhash64(7, array).tolist() == [r["h"] for r in rows]
    assert hash_fraction_mask(array, 0.2, 7).tolist() == [r["held"] for r in rows]
    assert hash_fraction_mask(array, 0.35, 11).tolist() == [r["sampled"] for r in rows]


def spark_window_edges(
    post_words: Any, start: dt.date | None, end: dt.date | None, holdout_fraction: float
) -> Any:
    """The reference: the same selection as a Spark transform (the job's old read)."""
    edges = post_words
    if start:
        edges = edges.where(F.col("day") >= F.lit(start))
    if end:
        edges = edges.where(F.col("day") <= F.lit(end))
    return edges.where(~holdout_filter(holdout_fraction)).select("post_id", "word")


@pytest.fixture()
def post_words(spark, lakehouse):
    """gold.post_words written by Spark (as the graph job does), three days, two commits."""
    rng = np.random.default_rng(5)
    days = [dt.date(2026, 3, d) for d in (1, 2, 3)]
    day_of_post = rng.integers(3, size=2500)  # a post is on one day
    rows = [
        (days[day_of_post[p]], f"post-{p}", f"w{int(rng.zipf(1.4)) % 300}")
        for p in range(2500)
        for _ in range(int(rng.integers(1, 9)))
    ]
    rows = sorted({(d, p, w) for d, p, w in rows})
    half = len(rows) // 2
    for part in (rows[:half], rows[half:]):
        frame = spark.createDataFrame(part, "day date, post_id string, word string")
        lakehouse.write(frame.repartition(3), "gold.post_words")
    return lakehouse


@pytest.mark.parametrize(
    ("start", "end", "fraction"),
    [
        (None, None, 0.2),
        (dt.date(2026, 3, 2), None, 0.2),
        (None, dt.date(2026, 3, 2), 0.0),
        (dt.date(2026, 3, 3), dt.date(2026, 3, 3), 0.5),
        (dt.date(2026, 4, 1), None, 0.2),  # an empty window
    ],
)
def test_driver_read_selects_sparks_edges(post_words, start, end, fraction):
    version = post_words.version("gold.post_words")
    by_spark = {
        (r["post_id"], r["word"])
        for r in spark_window_edges(
            post_words.read("gold.post_words", version), start, end, fraction
        ).collect()
    }
    edges, held_out = learn.window_edges_arrow(
        post_words.snapshot("gold.post_words", version), start, end, fraction
    )
    # the two parts split the window's posts: no post on both sides
    held_posts = set(held_out["post_id"].cast(pa.string()).to_pylist())
    assert held_posts.isdisjoint(edges["post_id"].cast(pa.string()).to_pylist())
    by_arrow = list(
        zip(
            edges["post_id"].cast(pa.string()).to_pylist(),
            edges["word"].cast(pa.string()).to_pylist(),
            strict=True,
        )
    )
    assert len(by_arrow) == len(set(by_arrow))
    assert set(by_arrow) == by_spark
    assert (len(by_spark) == 0) == (start == dt.date(2026, 4, 1))
    if by_spark:  # dictionary entries of held-out posts and their words are dropped
        corpus = training_corpus(edges)
        assert corpus.n_posts == len({p for p, _ in by_spark})
        assert set(corpus.vocabulary) == {w for _, w in by_spark}
        assert corpus.n_edges == len(by_spark)
