"""A corpus from a table of (post_id, word) edges, as the learn job reads them from
``gold.post_words``: Arrow and numpy only, no Python object per edge (80M edges at 10M
posts)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.corpus.arrays import Corpus, corpus_from_codes
from core.errors import InputDataError


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Integer codes and their dictionary (one dictionary over all chunks)."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)  # one memo table across the chunks
    else:
        column = pa.table({"c": column}).unify_dictionaries()["c"]
    combined = column.combine_chunks()
    # int32 as read (a dictionary's index type): 10M posts' 80M edges would take 0.6 GB
    # more per column as int64
    return np.asarray(combined.indices), combined.dictionary


def training_corpus(edges: pa.Table) -> Corpus:
    """The training edges (post_id, word: strings or dictionary-encoded) as a
    :class:`Corpus`; word ids by frequency (most frequent first, ties by word), posts in
    post id order. Arrow and numpy only: no Python object per edge.

    Raises:
        InputDataError: no edges.
    """
    if edges.num_rows == 0:
        raise InputDataError("no training edges in the learning window")
    post_codes, post_dictionary = _codes(edges["post_id"])
    word_codes, vocabulary = _codes(edges["word"])
    # dense post numbers in post id order (a dictionary may hold ids no edge uses): the
    # learned mapping must not depend on the order the table's files are read in, which
    # differs between the engines and layouts that wrote the same rows
    used = np.zeros(len(post_dictionary), dtype=bool)
    used[post_codes] = True
    present_posts = np.flatnonzero(used)
    by_id = np.asarray(pc.sort_indices(post_dictionary.take(pa.array(present_posts))))
    dense = np.full(len(post_dictionary), -1, dtype=np.int32)
    dense[present_posts[by_id]] = np.arange(present_posts.shape[0])
    counts = np.bincount(word_codes, minlength=len(vocabulary))
    present = np.flatnonzero(counts)
    # gold.post_words holds an edge once, so a word's edge count is its post frequency
    order = pc.sort_indices(
        pa.table({"count": counts[present], "word": vocabulary.take(pa.array(present))}),
        sort_keys=[("count", "descending"), ("word", "ascending")],
    )
    ranked = present[np.asarray(order, dtype=np.int64)]
    rank = np.full(len(vocabulary), -1, dtype=np.int32)
    rank[ranked] = np.arange(ranked.shape[0])
    return corpus_from_codes(
        dense[post_codes],
        rank[word_codes],
        vocabulary.take(pa.array(ranked)).to_numpy(zero_copy_only=False),
        int(used.sum()),
    )
