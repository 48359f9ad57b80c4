"""The corpus as arrays: a vocabulary plus a CSR post->word incidence, and its transpose.

A :class:`Corpus` is the word-to-post bipartite graph of paper 001 (Sect. 3.3): post ``p``
contains the distinct word ids ``indices[indptr[p]:indptr[p + 1]]`` (sorted), and
``word_posts()`` gives, per word, the posts that contain it. Building it from word lists is
one Arrow dictionary encoding of the flattened tokens plus a numba pass; no per-post dicts.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.corpus import _kernels
from core.errors import InvalidArgumentError


@dataclass(frozen=True, eq=False)
class Corpus:
    """Posts as distinct-word sets over a vocabulary.

    Attributes:
        vocabulary: ``(n_words,)`` object array of ``str``; word id -> word.
        indptr: ``(n_posts + 1,)`` int64 CSR row pointers.
        indices: ``(n_edges,)`` int32 word ids, distinct and ascending within a post.
        post_ids: optional ``(n_posts,)`` object array of post ids.
    """

    vocabulary: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    post_ids: np.ndarray | None = field(default=None)

    def __post_init__(self) -> None:
        _validate_csr(self.indptr, self.indices, len(self.vocabulary))
        if self.post_ids is not None and len(self.post_ids) != self.n_posts:
            raise InvalidArgumentError(
                f"post_ids has {len(self.post_ids)} entries for {self.n_posts} posts"
            )

    @property
    def n_posts(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_words(self) -> int:
        return len(self.vocabulary)

    @property
    def n_edges(self) -> int:
        return int(self.indices.shape[0])

    @cached_property
    def word_frequencies(self) -> np.ndarray:
        """``(n_words,)`` int64: f(w), the number of posts containing each word."""
        return np.bincount(self.indices, minlength=self.n_words).astype(np.int64)

    @cached_property
    def word_index(self) -> dict[str, int]:
        """word -> word id."""
        return {word: i for i, word in enumerate(self.vocabulary.tolist())}

    def word_posts(self) -> tuple[np.ndarray, np.ndarray]:
        """The transpose: ``(word_indptr int64 (n_words+1,), post_indices int32 (n_edges,))``."""
        return self._transpose

    @cached_property
    def _transpose(self) -> tuple[np.ndarray, np.ndarray]:
        return _kernels.transpose_csr(self.indptr, self.indices, self.n_words)

    def post_words(self, post: int) -> list[str]:
        """The words of one post (for display and tests)."""
        row = self.indices[self.indptr[post] : self.indptr[post + 1]]
        return [str(self.vocabulary[i]) for i in row]

    def select(self, posts: np.ndarray) -> Corpus:
        """A corpus of the given posts (boolean mask or index array), same vocabulary."""
        rows = np.asarray(posts)
        if rows.dtype == bool:
            if rows.shape != (self.n_posts,):
                raise InvalidArgumentError(
                    f"mask has shape {rows.shape}, expected ({self.n_posts},)"
                )
            rows = np.flatnonzero(rows)
        rows = rows.astype(np.int64, copy=False)
        if rows.size and (rows.min() < 0 or rows.max() >= self.n_posts):
            raise InvalidArgumentError("post index out of range")
        indptr, indices = _kernels.select_rows(self.indptr, self.indices, rows)
        post_ids = None if self.post_ids is None else self.post_ids[rows]
        return Corpus(self.vocabulary, indptr, indices, post_ids)

    def fingerprint(self) -> str:
        """A hash of the sequence of posts' word sets, independent of word-id order."""
        order = np.argsort(self.vocabulary.astype(str), kind="stable")
        rank = np.empty(self.n_words, dtype=np.int32)
        rank[order] = np.arange(self.n_words, dtype=np.int32)
        _, ranked = _kernels.dedupe_sort_rows(self.indptr, rank[self.indices])
        digest = hashlib.sha256()
        digest.update(self.indptr.tobytes())
        digest.update(ranked.tobytes())
        digest.update("\x1f".join(self.vocabulary[order].tolist()).encode("utf-8"))
        return digest.hexdigest()[:16]


def _validate_csr(indptr: np.ndarray, indices: np.ndarray, n_cols: int) -> None:
    if not isinstance(indptr, np.ndarray) or indptr.dtype != np.int64 or indptr.ndim != 1:
        raise InvalidArgumentError("indptr must be a 1-D int64 numpy array")
    if not isinstance(indices, np.ndarray) or indices.dtype != np.int32 or indices.ndim != 1:
        raise InvalidArgumentError("indices must be a 1-D int32 numpy array")
    if indptr.shape[0] < 1 or indptr[0] != 0 or indptr[-1] != indices.shape[0]:
        raise InvalidArgumentError("indptr must start at 0 and end at len(indices)")
    if np.any(np.diff(indptr) < 0):
        raise InvalidArgumentError("indptr must be non-decreasing")
    if indices.size and (indices.min() < 0 or indices.max() >= n_cols):
        raise InvalidArgumentError(f"indices must lie in [0, {n_cols})")


def _factorize(
    values: Sequence[object] | np.ndarray, kind: pa.DataType | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Codes (int64) and the distinct values (an object array) in order of first
    appearance, as ``pandas.factorize(sort=False)`` gives them: one Arrow hash pass, without
    importing pandas in every process that builds a corpus.

    Raises:
        InvalidArgumentError: a null value, or values of mixed kinds.
    """
    if len(values) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=object)
    try:
        column = pa.array(values if isinstance(values, np.ndarray) else list(values), kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise InvalidArgumentError(f"cannot encode the values: {err}") from err
    if column.null_count:
        raise InvalidArgumentError(f"{column.null_count} null values (ids and words are required)")
    encoded = pc.dictionary_encode(column)
    uniques = np.empty(len(encoded.dictionary), dtype=object)
    uniques[:] = encoded.dictionary.to_pylist()
    return np.asarray(encoded.indices, dtype=np.int64), uniques


def corpus_from_word_lists(
    word_lists: Sequence[Sequence[str]], post_ids: Sequence[str] | None = None
) -> Corpus:
    """Build a corpus from per-post word lists (repeats within a post are dropped).

    Args:
        word_lists: one list of (already normalised) words per post.
        post_ids: optional ids, one per post.

    Returns:
        The corpus; word ids follow first appearance.

    Raises:
        InvalidArgumentError: on a non-string word or mismatched ``post_ids``.
    """
    lengths = np.fromiter(
        (len(words) for words in word_lists), dtype=np.int64, count=len(word_lists)
    )
    flat = list(itertools.chain.from_iterable(word_lists))
    if any(not isinstance(word, str) for word in flat):
        raise InvalidArgumentError("every word must be a str")
    codes, vocabulary = _factorize(flat, pa.string())
    indptr = np.zeros(len(word_lists) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indptr, indices = _kernels.dedupe_sort_rows(indptr, codes.astype(np.int32))
    ids = None if post_ids is None else np.asarray(list(post_ids), dtype=object)
    return Corpus(vocabulary, indptr, indices, ids)


def corpus_from_arrow_lists(word_lists: pa.Array | pa.ChunkedArray) -> Corpus:
    """:func:`corpus_from_word_lists` for an Arrow ``list<string>`` column (e.g. a
    ``toArrow()`` of Spark's ``words``), without a Python object per word: the same corpus,
    word ids by first appearance. A null list is a post without words.

    Raises:
        InvalidArgumentError: if the column is not a list of strings, or a word is null.
    """
    if not (pa.types.is_list(word_lists.type) or pa.types.is_large_list(word_lists.type)) or not (
        pa.types.is_string(word_lists.type.value_type)
        or pa.types.is_large_string(word_lists.type.value_type)
    ):
        raise InvalidArgumentError(f"expected a list<string> column, got {word_lists.type}")
    lengths = np.asarray(pc.fill_null(pc.list_value_length(word_lists), 0), dtype=np.int64)
    flat = pc.list_flatten(word_lists)
    if flat.null_count:
        raise InvalidArgumentError("every word must be a str (found a null word)")
    indptr = np.zeros(len(word_lists) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    if len(flat) == 0:
        return Corpus(np.empty(0, dtype=object), indptr, np.empty(0, dtype=np.int32))
    # one memo table across the chunks: one dictionary, codes in first-appearance order
    encoded = pc.dictionary_encode(flat)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    codes = np.asarray(encoded.indices, dtype=np.int32)
    indptr, indices = _kernels.dedupe_sort_rows(indptr, codes)
    vocabulary = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
    return Corpus(vocabulary, indptr, indices)


def corpus_from_pairs(
    post_ids: Sequence[str] | np.ndarray, words: Sequence[str] | np.ndarray
) -> Corpus:
    """Build a corpus from (post id, word) edge pairs, e.g. a bipartite-graph table.

    Posts are ordered by first appearance; repeated pairs collapse.

    Raises:
        InvalidArgumentError: if the two sequences differ in length.
    """
    if len(post_ids) != len(words):
        raise InvalidArgumentError("post_ids and words must have equal length")
    post_codes, post_uniques = _factorize(post_ids)
    word_codes, word_uniques = _factorize(words)
    indptr, indices = _kernels.group_by_key(
        post_codes.astype(np.int64), word_codes.astype(np.int32), len(post_uniques)
    )
    indptr, indices = _kernels.dedupe_sort_rows(indptr, indices)
    return Corpus(word_uniques, indptr, indices, post_uniques)


def corpus_from_codes(
    post_codes: np.ndarray, word_codes: np.ndarray, vocabulary: Sequence[str], n_posts: int
) -> Corpus:
    """Build a corpus from edges already encoded as integers: post ``post_codes[i]``
    (0..n_posts-1) has word ``vocabulary[word_codes[i]]``. Repeated pairs collapse.

    Raises:
        InvalidArgumentError: lengths differ, or a code is out of range.
    """
    # int32 post codes stay int32 (no 8-byte copy of every edge); others become int64
    post_dtype = np.int32 if np.asarray(post_codes).dtype == np.int32 else np.int64
    posts = np.ascontiguousarray(post_codes, dtype=post_dtype)
    words = np.ascontiguousarray(word_codes, dtype=np.int32)
    if posts.shape != words.shape:
        raise InvalidArgumentError("post_codes and word_codes must have equal length")
    if posts.size and (posts.min() < 0 or posts.max() >= n_posts):
        raise InvalidArgumentError(f"post codes must lie in 0..{n_posts - 1}")
    if words.size and (words.min() < 0 or words.max() >= len(vocabulary)):
        raise InvalidArgumentError(f"word codes must lie in 0..{len(vocabulary) - 1}")
    indptr, indices = _kernels.group_by_key(posts, words, n_posts)
    indptr, indices = _kernels.dedupe_sort_rows(indptr, indices)
    return Corpus(np.asarray(vocabulary, dtype=object), indptr, indices)


def corpus_from_arrays(
    vocabulary: Sequence[str],
    indptr: np.ndarray,
    indices: np.ndarray,
    post_ids: Sequence[str] | None = None,
) -> Corpus:
    """Build a corpus from CSR arrays, converting dtypes and sorting/deduping rows.

    Raises:
        InvalidArgumentError: if the arrays are not a valid CSR over ``vocabulary``.
    """
    vocab = np.asarray(list(vocabulary), dtype=object)
    ptr = np.ascontiguousarray(indptr, dtype=np.int64)
    idx = np.ascontiguousarray(indices, dtype=np.int32)
    _validate_csr(ptr, idx, len(vocab))
    ptr, idx = _kernels.dedupe_sort_rows(ptr, idx)
    ids = None if post_ids is None else np.asarray(list(post_ids), dtype=object)
    return Corpus(vocab, ptr, idx, ids)


def holdout_mask(n_posts: int, holdout_fraction: float, seed: int) -> np.ndarray:
    """A seeded boolean mask: True for held-out posts, False for training posts.

    Raises:
        InvalidArgumentError: if ``holdout_fraction`` is not in (0, 1) or ``n_posts`` < 0.
    """
    if not 0.0 < holdout_fraction < 1.0:
        raise InvalidArgumentError(f"holdout_fraction must be in (0, 1), got {holdout_fraction}")
    if n_posts < 0:
        raise InvalidArgumentError(f"n_posts must be >= 0, got {n_posts}")
    return np.random.default_rng(seed).random(n_posts) < holdout_fraction


def take_rows(
    indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a CSR, in the given order (a row may repeat): ``(indptr int64, indices int32)``.

    Raises:
        InvalidArgumentError: for a row outside the CSR.
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= indptr.shape[0] - 1):
        raise InvalidArgumentError("rows must index the CSR")
    return _kernels.select_rows(indptr, indices, rows)


DISTINCT_CHUNK_ROWS = 1_000_000


def _row_chunks(
    ptr: np.ndarray, vals: np.ndarray
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    """``(lo, hi, row, position, values)`` of rows ``lo..hi`` a chunk at a time: each
    value's row (from 0 within the chunk), its position in its row, and the values."""
    n = ptr.shape[0] - 1
    for lo in range(0, n, DISTINCT_CHUNK_ROWS):
        hi = min(n, lo + DISTINCT_CHUNK_ROWS)
        lengths = ptr[lo + 1 : hi + 1] - ptr[lo:hi]
        starts = ptr[lo:hi] - ptr[lo]
        count = int(ptr[hi] - ptr[lo])
        position = np.arange(count, dtype=np.int64) - np.repeat(starts, lengths)
        row = np.repeat(np.arange(hi - lo, dtype=np.int64), lengths)
        yield lo, hi, row, position, vals[ptr[lo] : ptr[hi]]


def distinct_rows(indptr: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a CSR (rows equal value for value, in order): ``(first,
    inverse)``, the first row of each distinct one and each row's distinct index, so
    ``rows[first][inverse]`` are the rows.

    Rows are keyed by two 64-bit positional hashes and their length, then every row is
    compared with its representative value for value: a hash collision would be found
    (and is then resolved by comparing the rows themselves).
    """
    ptr = np.asarray(indptr, dtype=np.int64)
    vals = np.asarray(values)
    n = ptr.shape[0] - 1
    if n <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lengths = ptr[1:] - ptr[:-1]
    keys = np.zeros((n, 3), dtype=np.uint64)
    keys[:, 2] = lengths.astype(np.uint64)
    top = int(lengths.max()) if lengths.size else 1
    rng = np.random.default_rng(0x5EED)
    weights = [rng.integers(1, np.iinfo(np.int64).max, size=max(top, 1), dtype=np.int64)
               for _ in range(2)]  # fmt: skip
    # rows a chunk at a time: the per-value temporaries of 10M subscriptions' 80M words
    # took gigabytes at once
    with np.errstate(over="ignore"):
        for lo, hi, row, position, chunk in _row_chunks(ptr, vals):
            for k in range(2):
                terms = (chunk.astype(np.uint64) + np.uint64(1)) * weights[k][position].astype(
                    np.uint64
                )
                np.add.at(keys[lo:hi, k], row, terms)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    del keys
    inverse = inverse.reshape(-1)
    representative = first[inverse]
    same = lengths[representative] == lengths
    for lo, hi, row, position, chunk in _row_chunks(ptr, vals):
        rows_same = same[lo:hi]
        reps = representative[lo:hi]
        rep_values = vals[np.repeat(ptr[reps], lengths[lo:hi]) + position]
        differs = np.bincount(row, weights=(rep_values != chunk), minlength=hi - lo) > 0
        same[lo:hi] = rows_same & ~differs
    if not same.all():  # a collision: key the rows by their values instead
        seen: dict[bytes, int] = {}
        first_rows: list[int] = []
        inverse = np.empty(n, dtype=np.int64)
        for r in range(n):
            key = vals[ptr[r] : ptr[r + 1]].tobytes()
            index = seen.setdefault(key, len(first_rows))
            if index == len(first_rows):
                first_rows.append(r)
            inverse[r] = index
        return np.asarray(first_rows, dtype=np.int64), inverse
    return first.astype(np.int64), inverse.astype(np.int64)
