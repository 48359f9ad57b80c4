"""``bench learn-job`` writes the synthetic corpus' edges in chunks: the same edges as the
corpus, whatever the chunk size (10M posts would not fit as Python lists at once)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np
import psutil
import pytest
from deltalake import DeltaTable

from benchmarks import learn_job
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from schemas import table


@pytest.mark.parametrize("chunk", [1, 7_000, 1_000_000])
def test_edges_written_in_chunks_are_the_corpus_edges(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(learn_job, "EDGE_CHUNK_POSTS", chunk)
    n_posts = 300 if chunk == 1 else 20_000
    written = learn_job.write_edges(tmp_path, n_posts, seed=3)
    edges = DeltaTable(str(table("gold.post_words").location(tmp_path))).to_pyarrow_table()
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=n_posts, seed=3))
    assert corpus.post_ids is not None
    expected = sorted(
        zip(
            np.repeat(corpus.post_ids, np.diff(corpus.indptr)).tolist(),
            corpus.vocabulary[corpus.indices].tolist(),
            strict=True,
        )
    )
    got = sorted(zip(edges["post_id"].to_pylist(), edges["word"].to_pylist(), strict=True))
    assert written == edges.num_rows == corpus.n_edges
    assert got == expected
    assert set(edges["day"].to_pylist()) == {learn_job.EDGES_DAY}


@pytest.mark.spark
def test_the_scale_table_has_a_row_per_size_with_measured_figures(tmp_path, capsys):
    rows = learn_job.scale([3_000, 6_000], nodes=4, seed=1, out=tmp_path)
    assert [r["posts"] for r in rows] == [3_000, 6_000]
    assert rows[0]["wall_vs_first"] == 1.0
    for row in rows:
        # about 80% of the posts train (the hold-out is 0.2), every figure measured
        assert 0.7 * int(row["posts"]) < int(row["training_posts"]) < 0.9 * int(row["posts"])
        # the wall time holds its read and learn parts, and is relative to the first size's
        assert float(row["wall_s"]) >= float(row["read_s"]) + float(row["learn_s"]) - 0.02
        # (of the unrounded times: within what rounding each to 0.01 s leaves open)
        first, wall = float(rows[0]["wall_s"]), float(row["wall_s"])
        low, high = (wall - 0.005) / (first + 0.005), (wall + 0.005) / (first - 0.005)
        assert low - 0.005 <= row["wall_vs_first"] <= high + 0.005
        # peaks of real processes: a Python driver with pyspark and numpy imported, a JVM
        # with Spark loaded (each above 50 MiB), on this machine
        for peak in ("driver_peak_mib", "jvm_peak_mib"):
            assert 50 < int(row[peak]) < psutil.virtual_memory().total / 2**20, row
    written = (tmp_path / "learn_job_scale.csv").read_text().splitlines()
    assert written[0].startswith("posts,edges,training_posts") and len(written) == 3
    printed = capsys.readouterr().out
    assert "by corpus size" in printed
    # this run's scratch lakehouses (one per size, named as it wrote them) are removed; other
    # tests may run the learn job beside this one, so /tmp as a whole says nothing
    scratch = re.findall(r"synthetic posts to (\S+)", printed)
    assert len(scratch) == 2 and all(Path(s).parent == Path(tempfile.gettempdir()) for s in scratch)
    assert not [s for s in scratch if Path(s).exists()]
