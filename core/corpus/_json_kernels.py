"""numba kernel of the line judge's fast path (:mod:`core.corpus.json_lines`): plain arrays.

A post as the stream sees it almost always is one flat JSON object of string fields. The
kernel reads such a line in one pass and vouches for it only where Python's ``json`` would
take it and ``parse_json_record`` would accept it, with the same id and text: the object's
values all strings, valid UTF-8, known escapes, no lone surrogate, one ``id`` and one
``text``, both with content (``str.strip``'s white space read from a table of every code
point), the text at most ``max_chars`` code points. Anything else (a number, a nested value,
a BOM, an odd key, a repeated ``id``) is left undecided, for the judge's other paths.
"""

from __future__ import annotations

import numpy as np
from numba import njit

QUOTE = 34
BACKSLASH = 92


@njit(cache=True, inline="always")
def _json_space(b: int) -> bool:
    return b == 32 or b == 9 or b == 10 or b == 13


@njit(cache=True, inline="always")
def _hex(b: int) -> int:
    if 48 <= b <= 57:
        return b - 48
    if 97 <= b <= 102:
        return b - 87
    if 65 <= b <= 70:
        return b - 55
    return -1


@njit(cache=True, inline="always")
def _unicode_escape(data: np.ndarray, p: int, end: int) -> int:
    """The code unit of ``\\uXXXX`` whose ``u`` is at ``data[p]``, or -1."""
    if p + 5 > end:
        return -1
    value = 0
    for k in range(1, 5):
        digit = _hex(int(data[p + k]))
        if digit < 0:
            return -1
        value = (value << 4) | digit
    return value


@njit(cache=True, inline="always")
def _put(out: np.ndarray, o: int, cp: int) -> int:
    """Write ``cp`` as UTF-8 at ``out[o]``; returns the new end."""
    if cp < 0x80:
        out[o] = cp
        return o + 1
    if cp < 0x800:
        out[o] = 0xC0 | (cp >> 6)
        out[o + 1] = 0x80 | (cp & 0x3F)
        return o + 2
    if cp < 0x10000:
        out[o] = 0xE0 | (cp >> 12)
        out[o + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[o + 2] = 0x80 | (cp & 0x3F)
        return o + 3
    out[o] = 0xF0 | (cp >> 18)
    out[o + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[o + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[o + 3] = 0x80 | (cp & 0x3F)
    return o + 4


@njit(cache=True, inline="always")
def _utf8(data: np.ndarray, p: int, end: int) -> tuple[int, int]:
    """(code point, bytes) of the strict UTF-8 sequence at ``data[p]`` (what Python's
    decoder takes: no overlong form, no surrogate, nothing above U+10FFFF), or (-1, 0)."""
    b0 = int(data[p])
    if 0xC2 <= b0 <= 0xDF:
        n, cp, low, high = 2, b0 & 0x1F, 0x80, 0xBF
    elif 0xE0 <= b0 <= 0xEF:
        n, cp = 3, b0 & 0x0F
        low = 0xA0 if b0 == 0xE0 else 0x80
        high = 0x9F if b0 == 0xED else 0xBF
    elif 0xF0 <= b0 <= 0xF4:
        n, cp = 4, b0 & 0x07
        low = 0x90 if b0 == 0xF0 else 0x80
        high = 0x8F if b0 == 0xF4 else 0xBF
    else:
        return -1, 0
    if p + n > end:
        return -1, 0
    b1 = int(data[p + 1])
    if b1 < low or b1 > high:
        return -1, 0
    cp = (cp << 6) | (b1 & 0x3F)
    for k in range(2, n):
        b = int(data[p + k])
        if b & 0xC0 != 0x80:
            return -1, 0
        cp = (cp << 6) | (b & 0x3F)
    return cp, n


@njit(cache=True)
def _string(
    data: np.ndarray, p: int, end: int, out: np.ndarray, o: int, space: np.ndarray
) -> tuple[int, int, int, bool]:
    """Read the JSON string whose opening quote is just before ``data[p]``, decoded into
    ``out[o:]``. Returns (position after the closing quote, new end in ``out``, code
    points, has a code point that is not white space); position -1 when undecided."""
    chars = 0
    content = False
    while p < end:
        b = int(data[p])
        if b == QUOTE:
            return p + 1, o, chars, content
        if b == BACKSLASH:
            if p + 1 >= end:
                return -1, o, chars, content
            e = int(data[p + 1])
            if e in (QUOTE, BACKSLASH, 47):  # " \ /
                cp, p = e, p + 2
            elif e == 98:  # b
                cp, p = 8, p + 2
            elif e == 102:  # f
                cp, p = 12, p + 2
            elif e == 110:  # n
                cp, p = 10, p + 2
            elif e == 114:  # r
                cp, p = 13, p + 2
            elif e == 116:  # t
                cp, p = 9, p + 2
            elif e == 117:  # u
                cp = _unicode_escape(data, p + 1, end)
                if cp < 0 or 0xDC00 <= cp <= 0xDFFF:
                    return -1, o, chars, content
                p += 6
                if 0xD800 <= cp <= 0xDBFF:  # only a surrogate pair makes a code point
                    if p + 1 >= end or data[p] != BACKSLASH or data[p + 1] != 117:
                        return -1, o, chars, content
                    low = _unicode_escape(data, p + 1, end)
                    if low < 0xDC00 or low > 0xDFFF:
                        return -1, o, chars, content
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                    p += 6
            else:
                return -1, o, chars, content
            o = _put(out, o, cp)
        elif b < 0x20:  # a raw control character: json.loads refuses it
            return -1, o, chars, content
        elif b < 0x80:
            cp = b
            out[o] = b
            o += 1
            p += 1
        else:
            cp, n = _utf8(data, p, end)
            if cp < 0:
                return -1, o, chars, content
            for k in range(n):
                out[o + k] = data[p + k]
            o += n
            p += n
        chars += 1
        if not content and space[cp] == 0:
            content = True
    return -1, o, chars, content


@njit(cache=True)
def _key(data: np.ndarray, p: int, end: int) -> tuple[int, int]:
    """Read a key after its opening quote: (position after the closing quote, 1 for "id",
    2 for "text", 0 for another plain key); position -1 for a key the kernel leaves
    undecided (an escape, a control or non-ASCII byte)."""
    start = p
    while p < end:
        b = int(data[p])
        if b == QUOTE:
            n = p - start
            kind = 0
            if n == 2 and data[start] == 105 and data[start + 1] == 100:
                kind = 1
            elif (
                n == 4
                and data[start] == 116
                and data[start + 1] == 101
                and data[start + 2] == 120
                and data[start + 3] == 116
            ):
                kind = 2
            return p + 1, kind
        if b == BACKSLASH or b < 0x20 or b >= 0x80:
            return -1, 0
        p += 1
    return -1, 0


@njit(cache=True)
def scan_posts(
    data: np.ndarray,  # uint8: the lines' bytes
    offsets: np.ndarray,  # int64, lines + 1
    space: np.ndarray,  # uint8 per code point: 1 where str.isspace()
    max_chars: int,
    id_out: np.ndarray,  # uint8, at least data's length
    id_offsets: np.ndarray,  # int32, lines + 1 (written)
    text_out: np.ndarray,  # uint8, at least data's length
    text_offsets: np.ndarray,  # int32, lines + 1 (written)
    scratch: np.ndarray,  # uint8, at least the longest line
    vouched: np.ndarray,  # bool, lines (written)
) -> None:
    """Per line: vouched (its decoded id and text appended to the outputs) or not (an
    empty id and text). Decoding never lengthens a string, so the outputs fit."""
    n_id = 0
    n_text = 0
    id_offsets[0] = 0
    text_offsets[0] = 0
    for i in range(offsets.shape[0] - 1):
        p = offsets[i]
        end = offsets[i + 1]
        ok = False
        id_end = n_id
        text_end = n_text
        seen_id = False
        seen_text = False
        id_content = False
        text_content = False
        text_chars = 0
        while p < end and _json_space(int(data[p])):
            p += 1
        if p < end and data[p] == 123:  # {
            p += 1
            while True:
                while p < end and _json_space(int(data[p])):
                    p += 1
                if p >= end or data[p] != QUOTE:
                    break
                p, kind = _key(data, p + 1, end)
                if p < 0:
                    break
                while p < end and _json_space(int(data[p])):
                    p += 1
                if p >= end or data[p] != 58:  # :
                    break
                p += 1
                while p < end and _json_space(int(data[p])):
                    p += 1
                if p >= end or data[p] != QUOTE:  # a value that is not a string
                    break
                if kind == 1:
                    if seen_id:
                        break
                    seen_id = True
                    p, id_end, _, id_content = _string(data, p + 1, end, id_out, n_id, space)
                elif kind == 2:
                    if seen_text:
                        break
                    seen_text = True
                    p, text_end, text_chars, text_content = _string(
                        data, p + 1, end, text_out, n_text, space
                    )
                else:
                    p, _, _, _ = _string(data, p + 1, end, scratch, 0, space)
                if p < 0:
                    break
                while p < end and _json_space(int(data[p])):
                    p += 1
                if p < end and data[p] == 44:  # ,
                    p += 1
                    continue
                if p < end and data[p] == 125:  # }
                    p += 1
                    while p < end and _json_space(int(data[p])):
                        p += 1
                    ok = (
                        p == end
                        and seen_id
                        and seen_text
                        and id_content
                        and text_content
                        and text_chars <= max_chars
                    )
                break
        vouched[i] = ok
        if ok:
            n_id = id_end
            n_text = text_end
        id_offsets[i + 1] = n_id
        text_offsets[i + 1] = n_text
