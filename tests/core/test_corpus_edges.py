"""A corpus from (post_id, word) edges, as the learn job reads gold.post_words: checked
against a dictionary of sets built from the same pairs."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from core.corpus.edges import training_corpus
from core.errors import InputDataError


@pytest.mark.parametrize("dictionary", [False, True])
def test_training_corpus_is_built_exactly(dictionary):
    import pyarrow as pa

    rng = np.random.default_rng(3)
    pairs = [(f"p{int(rng.integers(300))}", f"w{int(rng.zipf(1.5)) % 97}") for _ in range(4000)]
    pairs += pairs[:50]  # a repeated edge collapses
    chunks = [pairs[i : i + 1500] for i in range(0, len(pairs), 1500)]  # several chunks
    tables = [
        pa.table({"post_id": [p for p, _ in chunk], "word": [w for _, w in chunk]})
        for chunk in chunks
    ]
    if dictionary:  # as Parquet reads them: each chunk with its own dictionary
        tables = [
            pa.table(
                {name: t[name].combine_chunks().dictionary_encode() for name in t.column_names}
            )
            for t in tables
        ]
    corpus = training_corpus(pa.concat_tables(tables))
    frequency = Counter(word for _, word in pairs)
    # ids by edge count (gold.post_words holds an edge once: the post frequency), ties by word
    assert list(corpus.vocabulary) == sorted(frequency, key=lambda w: (-frequency[w], w))
    expected: dict[str, set[str]] = {}
    for post, word in pairs:
        expected.setdefault(post, set()).add(word)
    got = [
        frozenset(corpus.vocabulary[corpus.indices[corpus.indptr[p] : corpus.indptr[p + 1]]])
        for p in range(corpus.n_posts)
    ]
    # posts in id order: the same edges read in another order build the same corpus
    assert got == [frozenset(expected[post]) for post in sorted(expected)]
    shuffled = pa.table(
        {"post_id": [p for p, _ in pairs[::-1]], "word": [w for _, w in pairs[::-1]]}
    )
    again = training_corpus(shuffled)
    assert np.array_equal(again.indptr, corpus.indptr)
    assert np.array_equal(again.indices, corpus.indices)
    empty = pa.table({"post_id": pa.array([], pa.string()), "word": pa.array([], pa.string())})
    with pytest.raises(InputDataError, match="no training edges"):
        training_corpus(empty)
