"""``bench learn-job`` writes the synthetic corpus' edges in chunks: the same edges as the
corpus, whatever the chunk size (10M posts would not fit as Python lists at once)."""

from __future__ import annotations

import numpy as np
import pytest
from deltalake import DeltaTable

from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from s3tm.bench import learn_job
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
