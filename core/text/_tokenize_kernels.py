"""numba kernels of the fast normaliser (:mod:`core.text.encoder`): plain arrays in and out.

The tokeniser walks a text's UTF-8 bytes once and does what ``normalize``'s regular
expression does on the lower-cased text (``normalize.py``: URL / @name tokens skipped whole,
words are runs of letters and digits joined by apostrophes), with each code point's role
read from a class table built from that same regular expression. A text holding a code
point the table cannot speak for (``&``, whose entities ``html.unescape`` rewrites; a
character ``lower()`` changes, other than A-Z) is left to the reference path.

Tokens are looked up in an open-addressing hash table of token bytes -> value (a word id,
or -1 for a stop word); tokens not in the table yet are handed back, to be normalised once
in Python and inserted.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# code point classes (the table is built in encoder.py from the reference regex)
SEPARATOR = 0  # not a word character nor white space; lower() keeps it
SPACE = 1  # white space as ``\s`` sees it
WORD = 2  # a word character (``[^\W_]``) that lower() keeps
UPPER_ASCII = 3  # A-Z: lower-cased on the fly
APOSTROPHE = 4  # ' and the typographic apostrophes normalize() maps to it
FALLBACK = 5  # anything else: the text goes to the reference path

OK = 0
NEEDS_FALLBACK = 1
HAS_UNKNOWN = 2

EMPTY_SLOT = -1
UNKNOWN = -2


@njit(cache=True, inline="always")
def _decode(data: np.ndarray, i: int, end: int) -> tuple[int, int]:
    """(code point, byte length) at ``data[i]``; (-1, 1) for a malformed sequence."""
    b0 = int(data[i])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xC0:
        return -1, 1
    if b0 < 0xE0:
        n = 2
        cp = b0 & 0x1F
    elif b0 < 0xF0:
        n = 3
        cp = b0 & 0x0F
    elif b0 < 0xF8:
        n = 4
        cp = b0 & 0x07
    else:
        return -1, 1
    if i + n > end:
        return -1, 1
    for k in range(1, n):
        b = int(data[i + k])
        if b & 0xC0 != 0x80:
            return -1, 1
        cp = (cp << 6) | (b & 0x3F)
    if cp > 0x10FFFF:
        return -1, 1
    return cp, n


@njit(cache=True, inline="always")
def _hash(buf: np.ndarray, start: int, end: int) -> np.uint64:
    h = np.uint64(14695981039346656037)
    for i in range(start, end):
        h = (h ^ np.uint64(buf[i])) * np.uint64(1099511628211)
    return h


# A slot is a row of ``slots`` (n_slots, 4) int64: the entry (EMPTY_SLOT if free), the
# token's bytes packed in two little-endian words when it is at most 16 bytes long (its
# first word LONG_KEY when longer), and its value. A short token, the common case, is then
# found in one cache line; a token's bytes are never NUL, so the packed words name it.
SHORT_KEY_BYTES = 16
LONG_KEY = -1  # 0xFF bytes: never the start of a UTF-8 token


@njit(cache=True, inline="always")
def _pack(buf: np.ndarray, start: int, end: int) -> tuple[np.int64, np.int64]:
    """The bytes of a token of at most 16 bytes, as two little-endian words."""
    w0 = np.uint64(0)
    w1 = np.uint64(0)
    for j in range(end - start):
        b = np.uint64(buf[start + j])
        if j < 8:
            w0 |= b << np.uint64(8 * j)
        else:
            w1 |= b << np.uint64(8 * (j - 8))
    return np.int64(w0), np.int64(w1)


@njit(cache=True, inline="always")
def _probe(
    buf: np.ndarray,
    start: int,
    end: int,
    h: np.uint64,
    w0: np.int64,
    w1: np.int64,
    slots: np.ndarray,
    key_start: np.ndarray,
    key_len: np.ndarray,
    arena: np.ndarray,
) -> int:
    """The slot of token ``buf[start:end]`` (hash ``h``, packed ``w0``/``w1`` when short),
    or ``-1 - s`` with s the free slot where it would go."""
    mask = slots.shape[0] - 1
    length = end - start
    s = np.int64(h & np.uint64(mask))
    while True:
        entry = slots[s, 0]
        if entry == EMPTY_SLOT:
            return -1 - int(s)
        if length <= SHORT_KEY_BYTES:
            if slots[s, 1] == w0 and slots[s, 2] == w1:
                return int(s)
        elif slots[s, 1] == LONG_KEY and key_len[entry] == length:
            k = key_start[entry]
            same = True
            for j in range(length):
                if arena[k + j] != buf[start + j]:
                    same = False
                    break
            if same:
                return int(s)
        s = (s + 1) & mask


@njit(cache=True, inline="always")
def _slot_of(
    buf: np.ndarray,
    start: int,
    end: int,
    slots: np.ndarray,
    key_start: np.ndarray,
    key_len: np.ndarray,
    arena: np.ndarray,
) -> int:
    w0 = np.int64(LONG_KEY)
    w1 = np.int64(0)
    if end - start <= SHORT_KEY_BYTES:
        w0, w1 = _pack(buf, start, end)
    return _probe(buf, start, end, _hash(buf, start, end), w0, w1, slots, key_start, key_len, arena)


@njit(cache=True, inline="always")
def _fill(
    slots: np.ndarray, s: int, entry: int, buf: np.ndarray, start: int, end: int, value: int
) -> None:
    slots[s, 0] = entry
    if end - start <= SHORT_KEY_BYTES:
        w0, w1 = _pack(buf, start, end)
        slots[s, 1] = w0
        slots[s, 2] = w1
    else:
        slots[s, 1] = LONG_KEY
        slots[s, 2] = 0
    slots[s, 3] = value


@njit(cache=True)
def insert_tokens(
    token_bytes: np.ndarray,
    token_start: np.ndarray,
    token_len: np.ndarray,
    token_value: np.ndarray,
    slots: np.ndarray,
    key_start: np.ndarray,
    key_len: np.ndarray,
    values: np.ndarray,
    arena: np.ndarray,
    n_entries: int,
    arena_used: int,
) -> tuple[int, int]:
    """Insert tokens not in the table yet (the caller made room: slots at most half full
    after, entry arrays and arena long enough). Returns the new (n_entries, arena_used)."""
    for t in range(token_start.shape[0]):
        start = token_start[t]
        end = start + token_len[t]
        found = _slot_of(token_bytes, start, end, slots, key_start, key_len, arena)
        if found >= 0:
            continue
        for j in range(end - start):
            arena[arena_used + j] = token_bytes[start + j]
        key_start[n_entries] = arena_used
        key_len[n_entries] = end - start
        values[n_entries] = token_value[t]
        _fill(slots, -1 - found, n_entries, token_bytes, start, end, token_value[t])
        n_entries += 1
        arena_used += end - start
    return n_entries, arena_used


@njit(cache=True)
def rehash(
    slots: np.ndarray,
    key_start: np.ndarray,
    key_len: np.ndarray,
    values: np.ndarray,
    arena: np.ndarray,
    n_entries: int,
) -> None:
    """Fill empty ``slots`` (a new, larger table) with entries 0..n_entries-1."""
    mask = slots.shape[0] - 1
    for entry in range(n_entries):
        start = key_start[entry]
        end = start + key_len[entry]
        s = np.int64(_hash(arena, start, end) & np.uint64(mask))
        while slots[s, 0] != EMPTY_SLOT:
            s = (s + 1) & mask
        _fill(slots, int(s), entry, arena, start, end, values[entry])


@njit(cache=True, inline="always")
def _entity_length(data: np.ndarray, p: int, end: int) -> int:
    """Bytes at ``data[p]`` (an ``&``) that ``html.unescape`` makes one separator: an
    ``&amp;`` / ``&lt;`` / ``&gt;``, or a lone ``&`` (at the end, or before a character
    that cannot start a reference: white space, ``<``, ``&``, ``;``); else 0 (another
    ``&`` goes to the reference path)."""
    if p + 1 >= end:
        return 1
    follower = data[p + 1]
    if (
        follower == 32  # space
        or 9 <= follower <= 13  # \t \n \v \f \r
        or follower == 60  # <
        or follower == 38  # &
        or follower == 59  # ;
    ):
        return 1
    if (
        p + 4 <= end
        and data[p + 2] == 116  # "t;"
        and data[p + 3] == 59
        and (data[p + 1] == 108 or data[p + 1] == 103)  # l, g
    ):
        return 4
    if (
        p + 5 <= end
        and data[p + 1] == 97  # a
        and data[p + 2] == 109  # m
        and data[p + 3] == 112  # p
        and data[p + 4] == 59  # ;
    ):
        return 5
    return 0


@njit(cache=True, inline="always")
def _lowered_byte(b: np.uint8) -> np.uint8:
    if 65 <= b <= 90:
        return b + np.uint8(32)
    return b


@njit(cache=True, inline="always")
def _is_word(c: int) -> bool:
    return WORD <= c <= UPPER_ASCII  # the two adjacent word classes


@njit(cache=True)
def encode_texts(
    data: np.ndarray,
    offsets: np.ndarray,
    todo: np.ndarray,
    classes: np.ndarray,
    slots: np.ndarray,
    key_start: np.ndarray,
    key_len: np.ndarray,
    values: np.ndarray,
    arena: np.ndarray,
    n_values: int,
    counts: np.ndarray,
    ids: np.ndarray,
    status: np.ndarray,
    unknown_bytes: np.ndarray,
    unknown_start: np.ndarray,
    unknown_len: np.ndarray,
    unknown_hash: np.ndarray,
) -> tuple[int, int, int]:
    """Tokenise and look up texts ``todo`` (text t = ``data[offsets[t]:offsets[t+1]]``).

    Per todo entry i: ``status[i]`` OK (its ``counts[i]`` distinct values, in order of
    first appearance, appended to ``ids``), NEEDS_FALLBACK, or HAS_UNKNOWN (its tokens
    not in the table are recorded in ``unknown_*``, each distinct token once, with its
    hash; no ids). Tokens read before a text turned out to need the reference path stay
    recorded: a token's value does not depend on the text it came from. Values are in
    ``[0, n_values)``; a value < 0 (stop word, no such word) is dropped.

    Returns (ids written, unknown tokens written, unknown bytes written).
    """
    seen = np.full(n_values, -1, dtype=np.int64)
    token = np.empty(data.shape[0] + 1, dtype=np.uint8)  # the lowered token being read
    n_ids = 0
    n_unknown = 0
    unknown_used = 0
    pending = np.full(1024, -1, dtype=np.int64)
    for i in range(todo.shape[0]):
        t = todo[i]
        start = offsets[t]
        end = offsets[t + 1]
        ids_before = n_ids
        verdict = OK
        prev_space = True  # the start of the text passes ``(?<!\S)``
        p = start
        while p < end:
            cp, n = _decode(data, p, end)
            if cp < 0:
                verdict = NEEDS_FALLBACK
                break
            c = classes[cp]
            if c == FALLBACK:
                n = _entity_length(data, p, end) if cp == 38 else 0
                if n == 0:
                    verdict = NEEDS_FALLBACK
                    break
                c = SEPARATOR  # an escaped &, < or >
            if prev_space and (
                cp == 64  # '@'
                or (
                    p + 4 <= end
                    and _lowered_byte(data[p]) == 104  # http
                    and _lowered_byte(data[p + 1]) == 116
                    and _lowered_byte(data[p + 2]) == 116
                    and _lowered_byte(data[p + 3]) == 112
                )
                or (
                    p + 4 <= end
                    and _lowered_byte(data[p]) == 119  # www.
                    and _lowered_byte(data[p + 1]) == 119
                    and _lowered_byte(data[p + 2]) == 119
                    and data[p + 3] == 46
                )
            ):
                # a URL / @name token: skipped up to the next white space; what it holds
                # must still be plain (the reference lowers and unescapes the whole text)
                while p < end:
                    cp, n = _decode(data, p, end)
                    if cp < 0:
                        verdict = NEEDS_FALLBACK
                        break
                    if classes[cp] == FALLBACK:
                        n = _entity_length(data, p, end) if cp == 38 else 0
                        if n == 0:
                            verdict = NEEDS_FALLBACK
                            break
                    elif classes[cp] == SPACE:
                        break
                    p += n
                if verdict == NEEDS_FALLBACK:
                    break
                prev_space = False
                continue
            if not _is_word(c):
                prev_space = c == SPACE
                p += n
                continue
            # a word: letter/digit runs joined by single apostrophes; its hash and packed
            # bytes are made as it is read
            length = 0
            th = np.uint64(14695981039346656037)
            w0 = np.uint64(0)
            w1 = np.uint64(0)
            while True:
                # one run of word characters
                while p < end:
                    cp, n = _decode(data, p, end)
                    if cp < 0:
                        break
                    c = classes[cp]
                    if not _is_word(c):
                        break
                    for k in range(n):
                        lb = _lowered_byte(data[p + k])
                        token[length + k] = lb
                        th = (th ^ np.uint64(lb)) * np.uint64(1099511628211)
                        at = length + k
                        if at < 8:
                            w0 |= np.uint64(lb) << np.uint64(8 * at)
                        elif at < SHORT_KEY_BYTES:
                            w1 |= np.uint64(lb) << np.uint64(8 * (at - 8))
                    length += n
                    p += n
                # an apostrophe followed by a word character continues the word
                if p >= end:
                    break
                cp, n = _decode(data, p, end)
                if cp < 0 or classes[cp] != APOSTROPHE or p + n >= end:
                    break
                cp2, _ = _decode(data, p + n, end)
                if cp2 < 0 or not _is_word(classes[cp2]):
                    break
                token[length] = 39  # "'"
                th = (th ^ np.uint64(39)) * np.uint64(1099511628211)
                if length < 8:
                    w0 |= np.uint64(39) << np.uint64(8 * length)
                elif length < SHORT_KEY_BYTES:
                    w1 |= np.uint64(39) << np.uint64(8 * (length - 8))
                length += 1
                p += n
            prev_space = False
            if length <= SHORT_KEY_BYTES:
                found = _probe(
                    token,
                    0,
                    length,
                    th,
                    np.int64(w0),
                    np.int64(w1),
                    slots,
                    key_start,
                    key_len,
                    arena,
                )
            else:
                found = _probe(
                    token,
                    0,
                    length,
                    th,
                    np.int64(LONG_KEY),
                    np.int64(0),
                    slots,
                    key_start,
                    key_len,
                    arena,
                )
            if found < 0:
                if verdict == OK:
                    verdict = HAS_UNKNOWN
                # each distinct unknown token is handed back once (a cold batch meets
                # each many times): a small set of the ones recorded, grown as needed
                h = th
                mask = pending.shape[0] - 1
                slot = np.int64(h & np.uint64(mask))
                recorded = False
                while pending[slot] >= 0:
                    u = pending[slot]
                    if unknown_hash[u] == h and unknown_len[u] == length:
                        same = True
                        for j in range(length):
                            if unknown_bytes[unknown_start[u] + j] != token[j]:
                                same = False
                                break
                        if same:
                            recorded = True
                            break
                    slot = (slot + 1) & mask
                if recorded:
                    continue
                for j in range(length):
                    unknown_bytes[unknown_used + j] = token[j]
                unknown_start[n_unknown] = unknown_used
                unknown_len[n_unknown] = length
                unknown_hash[n_unknown] = h
                pending[slot] = n_unknown
                n_unknown += 1
                unknown_used += length
                if 2 * n_unknown > pending.shape[0]:
                    pending = np.full(2 * pending.shape[0], -1, dtype=np.int64)
                    mask = pending.shape[0] - 1
                    for u in range(n_unknown):
                        slot = np.int64(unknown_hash[u] & np.uint64(mask))
                        while pending[slot] >= 0:
                            slot = (slot + 1) & mask
                        pending[slot] = u
                continue
            if verdict != OK:
                continue
            value = slots[found, 3]
            if value >= 0 and seen[value] != i:
                seen[value] = i
                ids[n_ids] = value
                n_ids += 1
        status[i] = verdict
        if verdict != OK:
            n_ids = ids_before
            counts[i] = 0
        else:
            counts[i] = n_ids - ids_before
    return n_ids, n_unknown, unknown_used


@njit(cache=True)
def scatter_rows(
    indptr: np.ndarray, rows: np.ndarray, counts: np.ndarray, ids: np.ndarray, out: np.ndarray
) -> None:
    """Write rows ``rows[i]`` (``counts[i]`` values each, consecutive in ``ids``) to
    ``out[indptr[row]:...]``."""
    k = 0
    for i in range(rows.shape[0]):
        o = indptr[rows[i]]
        for j in range(counts[i]):
            out[o + j] = ids[k + j]
        k += counts[i]
