from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import _kernels, corpus_from_arrays, corpus_from_word_lists, holdout_mask
from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError
from tests.hypothesis_tiers import examples

word_lists = st.lists(
    st.lists(st.sampled_from([f"w{i}" for i in range(12)]), max_size=8), min_size=1, max_size=30
)


def test_build_from_word_lists_dedupes_and_sorts() -> None:
    corpus = corpus_from_word_lists([["b", "a", "b"], ["c"], []], post_ids=["p1", "p2", "p3"])
    assert corpus.vocabulary.tolist() == ["b", "a", "c"]
    assert corpus.indptr.tolist() == [0, 2, 3, 3]
    assert corpus.indices.tolist() == [0, 1, 2]
    assert corpus.post_words(0) == ["b", "a"]
    assert corpus.word_frequencies.tolist() == [1, 1, 1]
    assert corpus.post_ids is not None
    assert corpus.post_ids.tolist() == ["p1", "p2", "p3"]


@settings(max_examples=examples(60), deadline=None)
@given(word_lists)
def test_arrays_match_python_sets(lists: list[list[str]]) -> None:
    corpus = corpus_from_word_lists(lists)
    for p, words in enumerate(lists):
        assert set(corpus.post_words(p)) == set(words)
        row = corpus.indices[corpus.indptr[p] : corpus.indptr[p + 1]]
        assert np.all(np.diff(row) > 0)
    word_indptr, word_posts = corpus.word_posts()
    for w, word in enumerate(corpus.vocabulary):
        expected = [p for p, words in enumerate(lists) if word in words]
        assert word_posts[word_indptr[w] : word_indptr[w + 1]].tolist() == expected
        assert corpus.word_frequencies[w] == len(expected)


@settings(max_examples=examples(30), deadline=None)
@given(word_lists, st.data())
def test_select_keeps_chosen_posts(lists: list[list[str]], data: st.DataObject) -> None:
    corpus = corpus_from_word_lists(lists, post_ids=[str(i) for i in range(len(lists))])
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(lists), max_size=len(lists))))
    subset = corpus.select(mask)
    chosen = np.flatnonzero(mask)
    assert subset.n_posts == chosen.size
    assert subset.post_ids is not None
    assert subset.post_ids.tolist() == [str(i) for i in chosen]
    for new, old in enumerate(chosen):
        assert subset.post_words(new) == corpus.post_words(int(old))


def test_corpus_from_arrays_converts_dtypes() -> None:
    corpus = corpus_from_arrays(["x", "y"], np.array([0, 3, 4]), np.array([1, 0, 1, 0]))
    assert corpus.indptr.dtype == np.int64 and corpus.indices.dtype == np.int32
    assert corpus.indices.tolist() == [0, 1, 0]


@pytest.mark.parametrize(
    ("indptr", "indices", "message"),
    [
        ([1, 2], [0, 0], "start at 0"),
        ([0, 3], [0], "end at len"),
        ([0, 2, 1, 2], [0, 1], "non-decreasing"),
        ([0, 1], [5], r"lie in \[0, 2\)"),
        ([0, 1], [-1], r"lie in \[0, 2\)"),
    ],
)
def test_invalid_csr_is_rejected(indptr: list[int], indices: list[int], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        corpus_from_arrays(["a", "b"], np.array(indptr), np.array(indices))


def test_corpus_requires_exact_dtypes() -> None:
    with pytest.raises(InvalidArgumentError, match="int64"):
        Corpus(
            np.array(["a"], dtype=object),
            np.array([0, 1], dtype=np.int32),
            np.array([0], dtype=np.int32),
        )


def test_non_string_words_are_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="str"):
        corpus_from_word_lists([["a", 3]])  # type: ignore[list-item]


def test_mismatched_post_ids_are_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="post_ids"):
        corpus_from_word_lists([["a"], ["b"]], post_ids=["only-one"])


def test_select_rejects_bad_masks() -> None:
    corpus = corpus_from_word_lists([["a"], ["b"]])
    with pytest.raises(InvalidArgumentError, match="shape"):
        corpus.select(np.array([True]))
    with pytest.raises(InvalidArgumentError, match="out of range"):
        corpus.select(np.array([2]))


def test_holdout_mask_is_seeded_and_sized() -> None:
    a = holdout_mask(10_000, 0.2, seed=7)
    assert np.array_equal(a, holdout_mask(10_000, 0.2, seed=7))
    assert not np.array_equal(a, holdout_mask(10_000, 0.2, seed=8))
    assert 0.18 < a.mean() < 0.22
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(InvalidArgumentError, match="holdout_fraction"):
            holdout_mask(10, bad, seed=1)


def test_fingerprint_depends_on_content() -> None:
    a = corpus_from_word_lists([["a", "b"], ["c"]])
    assert a.fingerprint() == corpus_from_word_lists([["b", "a"], ["c"]]).fingerprint()
    assert a.fingerprint() != corpus_from_word_lists([["a", "b"], ["d"]]).fingerprint()


def test_corpus_from_codes_equals_corpus_from_pairs():
    from core.corpus.arrays import corpus_from_codes, corpus_from_pairs

    rng = np.random.default_rng(7)
    posts = rng.integers(0, 50, 600)
    words = rng.integers(0, 30, 600)
    vocabulary = [f"w{k}" for k in range(30)]
    coded = corpus_from_codes(posts, words, vocabulary, 50)
    paired = corpus_from_pairs([f"p{p}" for p in posts], [vocabulary[w] for w in words])

    def word_sets(corpus, order):
        return [
            set(corpus.vocabulary[corpus.indices[corpus.indptr[p] : corpus.indptr[p + 1]]])
            for p in order
        ]

    present = sorted(set(posts.tolist()))
    by_id = {pid: k for k, pid in enumerate(paired.post_ids)}
    assert [s for s in word_sets(coded, present)] == word_sets(
        paired, [by_id[f"p{p}"] for p in present]
    )
    with pytest.raises(InvalidArgumentError, match="word codes"):
        corpus_from_codes(np.array([0]), np.array([30]), vocabulary, 1)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), max_size=60), max_size=20))
def test_dedupe_sort_rows_equals_sorted_sets(rows: list[list[int]]) -> None:
    # Rows longer than the insertion-sort limit take np.sort: both paths are drawn.
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    indices = np.array([v for r in rows for v in r], dtype=np.int32)
    out_indptr, out_indices = _kernels.dedupe_sort_rows(indptr, indices)
    expected = [sorted(set(r)) for r in rows]
    assert np.diff(out_indptr).tolist() == [len(r) for r in expected]
    assert out_indices.tolist() == [v for r in expected for v in r]


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.lists(st.sampled_from(["a", "b", "é", "", "w3"]), max_size=6)),
        max_size=25,
    ),
    st.lists(st.integers(0, 25), max_size=3),
    st.booleans(),
)
def test_corpus_from_arrow_lists_equals_corpus_from_word_lists(
    lists: list[list[str] | None], cuts: list[int], large: bool
) -> None:
    """The Arrow path (evaluate's held-out posts) builds the corpus the Python path does,
    however the column is chunked; a null list is a post without words."""
    import pyarrow as pa

    from core.corpus.arrays import corpus_from_arrow_lists

    kind = pa.large_list(pa.large_string()) if large else pa.list_(pa.string())
    bounds = [0, *sorted(min(c, len(lists)) for c in cuts), len(lists)]
    column = pa.chunked_array(
        [pa.array(lists[a:b], kind) for a, b in itertools.pairwise(bounds)], kind
    )
    got = corpus_from_arrow_lists(column)
    want = corpus_from_word_lists([words or [] for words in lists])
    assert got.vocabulary.tolist() == want.vocabulary.tolist()
    assert got.indptr.tolist() == want.indptr.tolist()
    assert got.indices.tolist() == want.indices.tolist()


def test_corpus_from_arrow_lists_refuses_null_words_and_other_types() -> None:
    import pyarrow as pa

    from core.corpus.arrays import corpus_from_arrow_lists

    with pytest.raises(InvalidArgumentError, match="null word"):
        corpus_from_arrow_lists(pa.array([["a", None]], pa.list_(pa.string())))
    with pytest.raises(InvalidArgumentError, match="list<string>"):
        corpus_from_arrow_lists(pa.array([[1, 2]], pa.list_(pa.int64())))
