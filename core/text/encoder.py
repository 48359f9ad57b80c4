"""Many texts -> the ids of their normalised words, fast: ``normalize`` over an Arrow array.

:class:`WordEncoder` gives, for every text, exactly the distinct words of
:func:`core.text.normalize.normalize` (as ids into its vocabulary), without a Python call
per text: a numba kernel tokenises the UTF-8 buffer of an Arrow string array
(``_tokenize_kernels``) and looks tokens up in a hash table of token -> word id. A token is
normalised (stop words, Porter stemmer) by :func:`core.text.normalize.normalize_token`
the first time the encoder meets it; word frequencies are Zipfian, so after a few thousand
texts almost every token is a repeat. Texts the kernel cannot speak for (an ``&`` that
``html.unescape`` would rewrite, a character ``lower()`` changes other than A-Z: ~5% of
real tweets) take the reference path, ``word_tokens`` + ``normalize_token``.

Two kinds of vocabulary:

- fixed (``grow=False``): the words of a routing version's dictionary; a word outside it is
  dropped (the streaming matcher: a post is routed by its subscription words only);
- growing (``grow=True``): every new word gets the next id (the batch normaliser).
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import InvalidArgumentError
from core.text import _tokenize_kernels as k
from core.text.normalize import normalize_tokens, word_tokens

_CURLY_APOSTROPHES = ("\u2019", "\u2018", "\u02bc")
_INITIAL_SLOTS = 1 << 14
# Above these the table starts again empty (a long-lived worker meeting endless new tokens
# keeps bounded memory; the next texts refill it).
MAX_TOKENS = 1 << 22
MAX_TOKEN_BYTES = 1 << 28
# ... and past this many words the vocabulary lacks, their tokens are forgotten (relearnt
# when next met): a fixed vocabulary's encoder remembers which word such a token led to,
# about 150 bytes a word
MAX_UNKNOWN_WORDS = 1 << 20


# Where code_point_classes() takes the table from: computed here (0.2-0.3 s of CPU), unless
# a layer above provides a cheaper source (spark_jobs keeps a copy on disk, read by every
# Python worker of every Spark job that encodes texts). core does no file I/O itself.
_classes_source: Callable[[], np.ndarray] | None = None


def use_code_point_classes(source: Callable[[], np.ndarray] | None) -> None:
    """Take the code-point table from ``source`` (None: compute it here) from now on;
    ``source`` must return what :func:`classify_code_points` does."""
    global _classes_source
    _classes_source = source
    code_point_classes.cache_clear()


@functools.cache
def code_point_classes() -> np.ndarray:
    """``(0x110000,)`` uint8: each code point's role in the tokeniser (see
    :func:`classify_code_points`), from the source :func:`use_code_point_classes` set.

    Raises:
        InvalidArgumentError: the source's table has another shape or type.
    """
    classes = classify_code_points() if _classes_source is None else _classes_source()
    if classes.shape != (sys.maxunicode + 1,) or classes.dtype != np.uint8:
        raise InvalidArgumentError(
            f"a code-point table is ({sys.maxunicode + 1},) uint8, got {classes.shape} "
            f"{classes.dtype}"
        )
    return classes


def classify_code_points() -> np.ndarray:
    """``(0x110000,)`` uint8: each code point's role in the tokeniser, read off the
    reference's own regular expressions (``[^\\W_]`` a word character, ``\\s`` white
    space) and ``str.lower``, so the kernel and ``normalize`` agree by construction."""
    every = "".join(chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF)
    codes = np.frombuffer(every.encode("utf-32-le"), dtype=np.uint32)
    classes = np.full(sys.maxunicode + 1, k.SEPARATOR, dtype=np.uint8)
    for kind, pattern in ((k.WORD, r"[^\W_]"), (k.SPACE, r"\s")):
        hits = np.array([m.start() for m in re.finditer(pattern, every)], dtype=np.int64)
        classes[codes[hits]] = kind
    # lower() must keep a character for the kernel to read it as it is; A-Z it lowers itself
    changed = [ch for ch in every if ch.lower() != ch]
    classes[[ord(ch) for ch in changed]] = k.FALLBACK
    classes[ord("A") : ord("Z") + 1] = k.UPPER_ASCII
    classes[ord("&")] = k.FALLBACK  # html.unescape territory
    classes[ord("'")] = k.APOSTROPHE
    for curly in _CURLY_APOSTROPHES:
        classes[ord(curly)] = k.APOSTROPHE
    return classes


def _empty_slots(n: int) -> np.ndarray:
    """A free hash table of ``n`` slots (see ``_tokenize_kernels``: entry, key, value)."""
    slots = np.zeros((n, 4), dtype=np.int64)
    slots[:, 0] = k.EMPTY_SLOT
    return slots


class _TokenTable:
    """Token bytes -> value, in plain arrays the kernels read."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.slots = _empty_slots(_INITIAL_SLOTS)
        self.key_start = np.zeros(_INITIAL_SLOTS // 2, dtype=np.int64)
        self.key_len = np.zeros(_INITIAL_SLOTS // 2, dtype=np.int64)
        self.values = np.zeros(_INITIAL_SLOTS // 2, dtype=np.int64)
        self.arena = np.zeros(_INITIAL_SLOTS * 8, dtype=np.uint8)
        self.n_entries = 0
        self.arena_used = 0

    def remap(self, new_values: np.ndarray) -> None:
        """Every entry whose value is an unknown word's code (``<= -2``) takes
        ``new_values[code]`` instead (``-2 - k`` for unknown word k: see
        :meth:`WordEncoder.extend`), in the entries and in the hash slots the kernels read."""
        n = self.n_entries
        values = self.values[:n]
        coded = values <= -2
        values[coded] = new_values[-2 - values[coded]]
        occupied = np.flatnonzero(self.slots[:, 0] != k.EMPTY_SLOT)
        self.slots[occupied, 3] = values[self.slots[occupied, 0]]

    def drop_coded(self) -> None:
        """Forget the entries holding an unknown word's code (``<= -2``): normalised again
        when next met."""
        n = self.n_entries
        kept = np.flatnonzero(self.values[:n] >= -1)
        arena, starts, lengths = self.arena, self.key_start[kept], self.key_len[kept]
        values = self.values[kept]
        self.clear()
        if kept.size:
            self.insert(arena, starts, lengths, values)

    def insert(
        self, token_bytes: np.ndarray, starts: np.ndarray, lengths: np.ndarray, values: np.ndarray
    ) -> None:
        need_entries = self.n_entries + starts.shape[0]
        need_bytes = self.arena_used + int(lengths.sum())
        if need_entries > MAX_TOKENS or need_bytes > MAX_TOKEN_BYTES:
            self.clear()
            need_entries, need_bytes = starts.shape[0], int(lengths.sum())
        if need_entries > self.key_start.shape[0]:
            size = max(need_entries, 2 * self.key_start.shape[0])
            for name in ("key_start", "key_len", "values"):
                grown = np.zeros(size, dtype=np.int64)
                grown[: self.n_entries] = getattr(self, name)[: self.n_entries]
                setattr(self, name, grown)
        if need_bytes > self.arena.shape[0]:
            grown_arena = np.zeros(max(need_bytes, 2 * self.arena.shape[0]), dtype=np.uint8)
            grown_arena[: self.arena_used] = self.arena[: self.arena_used]
            self.arena = grown_arena
        if 2 * need_entries > self.slots.shape[0]:
            size = self.slots.shape[0]
            while 2 * need_entries > size:
                size *= 2
            self.slots = _empty_slots(size)
            k.rehash(
                self.slots, self.key_start, self.key_len, self.values, self.arena, self.n_entries
            )
        self.n_entries, self.arena_used = k.insert_tokens(
            token_bytes,
            starts,
            lengths,
            values,
            self.slots,
            self.key_start,
            self.key_len,
            self.values,
            self.arena,
            self.n_entries,
            self.arena_used,
        )


def _string_buffers(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes, int64 offsets of each text into them) of a string array, no copy of
    the bytes."""
    if pa.types.is_large_string(texts.type):
        offset_type = "<i8"
    elif pa.types.is_string(texts.type):
        offset_type = "<i4"
    else:
        raise InvalidArgumentError(f"texts must be a string array, got {texts.type}")
    if texts.null_count:
        raise InvalidArgumentError(f"texts must not be null ({texts.null_count} are)")
    _, offsets_buffer, data_buffer = texts.buffers()
    n = len(texts)
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[texts.offset : texts.offset + n + 1]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, dtype=np.uint8)
    )
    return data, offsets.astype(np.int64)


class WordEncoder:
    """Texts -> CSR of the ids of their normalised words (distinct per text, unordered).

    Args:
        words: the vocabulary (word i has id i).
        grow: give new words the next ids (``words`` then grows); else drop them. A grown
            vocabulary may hold a few words no text had (tokens read before a text turned
            out to need the reference path are learnt all the same): ids map to words, the
            vocabulary is not a census.

    ``encode(texts)`` gives for text t exactly ``{id of w for w in normalize(t)}`` (the ids
    of the words in the vocabulary when it is fixed).
    """

    def __init__(self, words: Sequence[str] = (), *, grow: bool = False) -> None:
        self._words = list(words)
        self._word_id = {word: i for i, word in enumerate(self._words)}
        if len(self._word_id) != len(self._words):
            raise InvalidArgumentError("the vocabulary holds a word twice")
        self._grow = grow
        self._table = _TokenTable()
        self._classes = code_point_classes()
        self._fallback_cache: dict[str, int] = {"": -1}
        # words tokens normalised to that the vocabulary lacks: a token's value is -2 - k
        # for unknown word k (-1: no word at all, a stop word), so a grown vocabulary
        # re-points the tokens of the words it gained (extend) instead of relearning them
        self._unknown: dict[str, int] = {}

    @property
    def words(self) -> list[str]:
        """The vocabulary (grows with ``grow=True``)."""
        return self._words

    @property
    def n_words(self) -> int:
        return len(self._words)

    @property
    def n_tokens(self) -> int:
        """Distinct tokens the kernel's table knows."""
        return self._table.n_entries

    def extend(self, words: Sequence[str]) -> None:
        """Follow a grown vocabulary (``words`` is the whole new one; old ids unchanged).
        The tokens known to lead to a word it gained lead to it from now on: nothing is
        normalised again."""
        if list(words[: len(self._words)]) != self._words:
            raise InvalidArgumentError("extend() needs the old vocabulary as the new one's prefix")
        new_values = np.arange(-2, -2 - len(self._unknown), -1, dtype=np.int64)
        for word in words[len(self._words) :]:
            self._word_id[word] = len(self._words)
            code = self._unknown.get(word)
            if code is not None:
                new_values[code] = len(self._words)
            self._words.append(word)
        if new_values.size and bool((new_values >= 0).any()):
            self._table.remap(new_values)
            for token, value in self._fallback_cache.items():
                if value <= -2:
                    self._fallback_cache[token] = int(new_values[-2 - value])

    def _unknown_code(self, word: str) -> int:
        """The value of tokens normalised to ``word``, a word the vocabulary lacks."""
        code = self._unknown.get(word)
        if code is None:
            code = self._unknown[word] = len(self._unknown)
        return -2 - code

    def _forget_unknown(self) -> None:
        """Unknown words' codes start again: the tokens holding one are forgotten (they are
        normalised again when next met, so a word gained later is still found)."""
        self._table.drop_coded()
        self._fallback_cache = {t: v for t, v in self._fallback_cache.items() if v >= -1}
        self._unknown = {}

    def _fallback(self, text: str) -> list[int]:
        cache = self._fallback_cache
        found: dict[int, None] = {}
        for token in word_tokens(text):
            value = cache.get(token)
            if value is None:
                value = cache[token] = self._words_of([token])[0]
            if value >= 0:
                found[value] = None
        if len(cache) > MAX_TOKENS:
            self._fallback_cache = {"": -1}
        return list(found)

    def _learn(
        self,
        token_bytes: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
    ) -> None:
        """Normalise the tokens the table does not know (distinct) and insert them."""
        raw = token_bytes.tobytes()
        tokens = [
            raw[s : s + n].decode("utf-8")
            for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)
        ]
        values = np.array(self._words_of(tokens), dtype=np.int64)
        self._table.insert(token_bytes, starts, lengths, values)

    def _words_of(self, tokens: list[str]) -> list[int]:
        if len(self._unknown) + len(tokens) > MAX_UNKNOWN_WORDS:
            self._forget_unknown()  # (before these tokens get codes, never among them)
        word_id, grow = self._word_id, self._grow
        values = []
        for word in normalize_tokens(tokens):
            found = -1 if word is None else word_id.get(word, -1)
            if found < 0 and word is not None:
                if grow:
                    found = word_id[word] = len(self._words)
                    self._words.append(word)
                else:
                    found = self._unknown_code(word)
            values.append(found)
        return values

    def _run(
        self, data: np.ndarray, offsets: np.ndarray, todo: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        n_bytes = int(offsets[todo + 1].sum() - offsets[todo].sum()) if todo.size else 0
        counts = np.zeros(todo.shape[0], dtype=np.int64)
        status = np.zeros(todo.shape[0], dtype=np.int8)
        # a token takes at least one byte and a separator: bounds on ids and tokens
        ids = np.empty(n_bytes // 2 + todo.shape[0] + 1, dtype=np.int64)
        unknown_bytes = np.empty(n_bytes + 1, dtype=np.uint8)
        unknown_start = np.empty(n_bytes // 2 + todo.shape[0] + 1, dtype=np.int64)
        unknown_len = np.empty_like(unknown_start)
        unknown_hash = np.empty(unknown_start.shape[0], dtype=np.uint64)
        table = self._table
        n_ids, n_unknown, _ = k.encode_texts(
            data,
            offsets,
            todo,
            self._classes,
            table.slots,
            table.key_start,
            table.key_len,
            table.values,
            table.arena,
            max(len(self._words), 1),
            counts,
            ids,
            status,
            unknown_bytes,
            unknown_start,
            unknown_len,
            unknown_hash,
        )
        return (
            counts,
            ids[:n_ids],
            status,
            unknown_bytes,
            unknown_start[:n_unknown],
            unknown_len[:n_unknown],
        )

    def encode(
        self, texts: pa.Array | pa.ChunkedArray | Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(indptr int64, word_ids int32)``: text t's word ids are
        ``word_ids[indptr[t]:indptr[t+1]]``, distinct, in no set order.

        Raises:
            InvalidArgumentError: if ``texts`` is not strings, or holds a null.
        """
        if isinstance(texts, pa.ChunkedArray):
            texts = texts.combine_chunks()
        if not isinstance(texts, pa.Array):
            if any(not isinstance(t, str) for t in texts):
                raise InvalidArgumentError("texts must be str")
            texts = pa.array(texts, pa.string())
        data, offsets = _string_buffers(texts)
        n = len(texts)
        todo = np.arange(n, dtype=np.int64)
        counts, ids, status, *unknown = self._run(data, offsets, todo)
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        ok = status == k.OK
        parts.append((todo[ok], counts[ok], ids))
        pending = todo[status == k.HAS_UNKNOWN]
        if pending.size:
            self._learn(*unknown)
            counts2, ids2, status2, *_ = self._run(data, offsets, pending)
            if np.any(status2 != k.OK):  # the table was cleared while learning: rare
                retry = pending[status2 != k.OK]
                status[np.searchsorted(todo, retry)] = k.NEEDS_FALLBACK
            kept = status2 == k.OK
            parts.append((pending[kept], counts2[kept], ids2))
        fallback = todo[status == k.NEEDS_FALLBACK]
        if fallback.size:
            lists = [self._fallback(texts[int(t)].as_py()) for t in fallback]
            parts.append(
                (
                    fallback,
                    np.array([len(x) for x in lists], dtype=np.int64),
                    np.array([i for x in lists for i in x], dtype=np.int64),
                )
            )
        per_text = np.zeros(n, dtype=np.int64)
        for rows, row_counts, _ in parts:
            per_text[rows] = row_counts
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(per_text, out=indptr[1:])
        word_ids = np.empty(int(indptr[-1]), dtype=np.int32)
        for rows, row_counts, row_ids in parts:
            k.scatter_rows(indptr, rows, row_counts, row_ids, word_ids)
        return indptr, word_ids


_SHARED: dict[str, WordEncoder] = {}
_SHARED_RANKS: dict[str, tuple[WordEncoder, int, pa.Array, np.ndarray]] = {}
# a worker's shared vocabulary starts again past this many words (bounded memory)
MAX_SHARED_WORDS = 1 << 22


def clear_shared_encoder() -> None:
    """Start :func:`normalize_arrow`'s shared vocabulary and token table again."""
    _SHARED.clear()
    _SHARED_RANKS.clear()


def normalize_arrow(texts: pa.Array | pa.ChunkedArray | Sequence[str]) -> pa.ListArray:
    """:func:`core.text.normalize.normalize` of many texts at once, as Arrow: per text its
    sorted distinct words (``list<string>``), exactly ``normalize(text)``.

    One growing :class:`WordEncoder` per process serves every call (a Python worker of a
    Spark job keeps its token table from task to task).
    """
    encoder = _SHARED.get("encoder")
    if encoder is None or encoder.n_words > MAX_SHARED_WORDS:
        encoder = _SHARED["encoder"] = WordEncoder(grow=True)
    indptr, ids = encoder.encode(texts)
    vocabulary, rank = _ranked_vocabulary(encoder)
    # sort each text's ids by their words: one stable sort by (text, rank) over all ids
    text_of = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    order = np.lexsort((rank[ids], text_of))
    return pa.ListArray.from_arrays(
        pa.array(indptr.astype(np.int32)), vocabulary.take(pa.array(ids[order]))
    )


def _ranked_vocabulary(encoder: WordEncoder) -> tuple[pa.Array, np.ndarray]:
    """The vocabulary as Arrow and each word's rank in sorted order, kept until it grows."""
    cached = _SHARED_RANKS.get("ranks")
    if cached is not None and cached[0] is encoder and cached[1] == encoder.n_words:
        return cached[2], cached[3]
    vocabulary = pa.array(encoder.words, pa.string())
    rank = np.empty(len(vocabulary), dtype=np.int64)
    rank[np.asarray(pc.sort_indices(vocabulary))] = np.arange(len(vocabulary))
    _SHARED_RANKS["ranks"] = (encoder, encoder.n_words, vocabulary, rank)
    return vocabulary, rank
