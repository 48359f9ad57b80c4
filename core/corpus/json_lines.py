"""Judge many JSON-lines records at once: the verdicts of ``parse_json_record``, at Arrow speed.

The streaming job receives raw lines (a landing file's or a Kafka record's bytes) and must
give every one of them the same verdict as the batch ingest, which judges line by line in
Python (:func:`core.corpus.records.parse_json_record`). Doing that per line costs ~4 us a post.
Here a numba kernel (``_json_kernels``) first reads the lines that are flat objects of
string fields, the stream's posts, in one pass and vouches for those it can (see there);
the rest are parsed with Arrow's JSON reader, which hands to Python only the lines it
cannot speak for:

- a batch Arrow refuses (any invalid line, a numeric id, a repeated key, bad UTF-8, ...) is
  judged line by line;
- a line Arrow accepts but whose values fail a rule (no text, blank or oversized text, no
  id) is judged by ``parse_json_record`` so that its reason is the ingest's reason;
- a line where Arrow is more lenient than Python's ``json`` (``Inf`` / ``-Inf`` literals) is
  judged by Python too (an escaped lone surrogate, which Python keeps and Arrow rejects,
  sends its whole batch to Python by the first rule).

What comes out is exact by construction for every line Python judges, and the tests check
the rest against ``parse_json_record`` with generated lines (hypothesis).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from core.corpus import _json_kernels
from core.corpus.records import MAX_TEXT_CHARS, parse_json_record

# bytes.strip()'s whitespace: what the ingest calls a blank line
_BLANK_LINE = r"^[ \t\n\r\x0b\x0c]*$"
# a character that str.strip() keeps, i.e. content (whitespace as Python defines it)
_PY_WHITESPACE = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
_HAS_CONTENT = "[^" + "".join(f"\\x{{{ord(c):x}}}" for c in _PY_WHITESPACE) + "]"
# Inf/NaN literals in a value position: Arrow reads "Inf", Python only "Infinity"/"NaN".
# (An escaped lone surrogate, which Python keeps, makes Arrow refuse the whole batch.)
_PYTHON_DECIDES = r"[:,\[]\s*-?(?:Inf|NaN)"
_PYTHON_HINTS = (b"Inf", b"NaN")
_POST_FIELDS = pa.schema([("id", pa.string()), ("text", pa.string())])
_PARSE = pj.ParseOptions(explicit_schema=_POST_FIELDS, unexpected_field_behavior="ignore")
BLANK_LINE = "blank line"
NO_ID = "no 'id' field (the stream needs one to deliver a post once)"


@dataclass(frozen=True)
class JudgedLines:
    """One entry per input line: an accepted post (``post_id``, ``text``; ``reason`` null)
    or a rejected line (``reason`` set; ``post_id`` kept where the line had a usable one)."""

    post_id: pa.Array
    text: pa.Array
    reason: pa.Array

    @property
    def accepted(self) -> pa.Array:
        return pc.is_null(self.reason)


def judge_lines(lines: pa.Array, *, require_id: bool = True) -> JudgedLines:
    """Judge raw JSON-lines records (binary or string array; a null reads as a blank line).

    ``require_id``: a post without an ``id`` is rejected (the stream keys deliveries by it;
    the batch ingest names such a post by file and line instead).
    """
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    data = lines.cast(pa.binary())
    fast = _fast_judge(data)
    if fast is None or pc.all(pc.is_null(fast.reason)).as_py():
        return fast or _judge(data, require_id)
    # the lines the kernel left undecided take the other paths
    undecided = pc.is_valid(fast.reason)
    rest = _judge(data.filter(undecided), require_id)
    return JudgedLines(
        *(
            pc.replace_with_mask(old, undecided, new)
            for old, new in (
                (fast.post_id, rest.post_id),
                (fast.text, rest.text),
                (fast.reason, rest.reason),
            )
        )
    )


_UNDECIDED = "undecided"


def _fast_judge(data: pa.Array) -> JudgedLines | None:
    """The kernel's verdicts: accepted lines with their id and text, the others with the
    reason ``_UNDECIDED`` (a placeholder the caller replaces). None for an empty batch."""
    n = len(data)
    if n == 0:
        return None
    _, offsets_buffer, data_buffer = data.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[data.offset : data.offset + n + 1]
    raw = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, dtype=np.uint8)
    )
    first, last = int(offsets[0]), int(offsets[-1])
    longest = int(np.max(np.diff(offsets))) if n else 0
    id_out = np.empty(last - first, dtype=np.uint8)
    text_out = np.empty(last - first, dtype=np.uint8)
    id_offsets = np.empty(n + 1, dtype=np.int32)
    text_offsets = np.empty(n + 1, dtype=np.int32)
    vouched = np.zeros(n, dtype=np.bool_)
    _json_kernels.scan_posts(
        raw[first:last],
        offsets.astype(np.int64) - first,
        _space_table(),
        MAX_TEXT_CHARS,
        id_out,
        id_offsets,
        text_out,
        text_offsets,
        np.empty(longest, dtype=np.uint8),
        vouched,
    )
    if data.null_count:  # a null line is a blank one, whatever its offsets say
        vouched &= np.asarray(data.is_valid(), dtype=np.bool_)
    validity = pa.py_buffer(np.packbits(vouched, bitorder="little"))
    nulls = n - int(vouched.sum())

    def strings(values: np.ndarray, value_offsets: np.ndarray) -> pa.Array:
        return pa.Array.from_buffers(
            pa.string(),
            n,
            [validity, pa.py_buffer(value_offsets), pa.py_buffer(values[: value_offsets[-1]])],
            null_count=nulls,
        )

    reason = pc.if_else(pa.array(vouched), pa.scalar(None, pa.string()), _UNDECIDED)
    return JudgedLines(strings(id_out, id_offsets), strings(text_out, text_offsets), reason)


@functools.cache
def _space_table() -> np.ndarray:
    """``(0x110000,)`` uint8: 1 for the code points ``str.strip`` removes."""
    table = np.zeros(0x110000, dtype=np.uint8)
    table[[ord(c) for c in _PY_WHITESPACE]] = 1
    return table


def _judge(data: pa.Array, require_id: bool) -> JudgedLines:
    """Arrow's JSON reader over the batch, Python for what it cannot speak for."""
    n = len(data)
    blank = pc.fill_null(pc.match_substring_regex(data, _BLANK_LINE), True)
    candidate = pc.invert(blank)
    raw = data.filter(candidate)
    ids, texts, vouched = _arrow_parse(raw)
    # scatter the candidates' values back over all lines; rows Arrow did not vouch for
    # stay null and are judged by Python below
    post_id = pc.replace_with_mask(
        pa.nulls(n, pa.string()), candidate, pc.if_else(vouched, ids, None)
    )
    text = pc.replace_with_mask(
        pa.nulls(n, pa.string()), candidate, pc.if_else(vouched, texts, None)
    )
    reason = pc.if_else(blank, BLANK_LINE, pa.scalar(None, pa.string()))
    undecided = pc.replace_with_mask(pa.repeat(pa.scalar(False), n), candidate, pc.invert(vouched))
    rows = pc.indices_nonzero(undecided)
    if len(rows):
        judged = [_python_judge(line, require_id) for line in data.take(rows).to_pylist()]
        columns = [pa.array(c, pa.string()) for c in zip(*judged, strict=True)]
        post_id, text, reason = (
            pc.replace_with_mask(old, undecided, new)
            for old, new in zip((post_id, text, reason), columns, strict=True)
        )
    return JudgedLines(post_id, text, reason)


def _arrow_parse(raw: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(id, text, vouched) per line: ``vouched`` where Arrow's reading is the verdict."""
    n = len(raw)
    nothing = (pa.nulls(n, pa.string()), pa.nulls(n, pa.string()), pa.repeat(pa.scalar(False), n))
    if n == 0:
        return nothing
    joined = _newline_joined(raw)
    try:
        parsed = pj.read_json(
            pa.BufferReader(joined),
            read_options=pj.ReadOptions(
                use_threads=False, block_size=max(1 << 20, joined.size + 1)
            ),
            parse_options=_PARSE,
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return nothing
    if parsed.num_rows != n:  # two objects on one line: let Python say so
        return nothing
    ids = parsed.column("id").combine_chunks()
    texts = parsed.column("text").combine_chunks()
    checks = [
        pc.match_substring_regex(ids, _HAS_CONTENT),
        pc.match_substring_regex(texts, _HAS_CONTENT),
        pc.less_equal(pc.utf8_length(texts), MAX_TEXT_CHARS),
        pc.invert(_python_decides(raw)),
    ]
    vouched = functools.reduce(pc.and_, (pc.fill_null(c, False) for c in checks))
    return ids, texts, vouched


def _newline_joined(raw: pa.Array) -> pa.Buffer:
    """The lines as one newline-separated buffer, without a Python object per line."""
    ended = pc.binary_join_element_wise(
        raw, pa.scalar(b"\n", pa.binary()), pa.scalar(b"", pa.binary())
    )
    offsets = np.frombuffer(ended.buffers()[1], dtype=np.int32)
    first, last = offsets[ended.offset], offsets[ended.offset + len(ended)]
    return ended.buffers()[2].slice(int(first), int(last - first))


def _python_decides(raw: pa.Array) -> pa.Array:
    """Lines with a literal Arrow and Python read differently (see _PYTHON_DECIDES): the
    hints are found in the batch's whole byte buffer at once (``bytes.find``, far faster
    than a per-line substring kernel), the regular expression runs on the few lines that
    hold one."""
    n = len(raw)
    if isinstance(raw, pa.ChunkedArray):
        raw = raw.combine_chunks()
    _, offsets_buffer, data_buffer = raw.buffers()
    if data_buffer is None or n == 0:
        return pa.repeat(pa.scalar(False), n)
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[raw.offset : raw.offset + n + 1]
    data = data_buffer.to_pybytes()[: int(offsets[-1])]
    hits: list[int] = []
    for hint in _PYTHON_HINTS:
        at = data.find(hint, int(offsets[0]))
        while at != -1:
            hits.append(at)
            at = data.find(hint, at + 1)
    if not hits:
        return pa.repeat(pa.scalar(False), n)
    # the line of each hit (a hit across two lines' bytes only costs that line a regex)
    rows = np.unique(np.searchsorted(offsets, np.array(hits), side="right") - 1)
    rows = rows[(rows >= 0) & (rows < n)]
    has_hint = np.zeros(n, dtype=np.bool_)
    has_hint[rows] = True
    exact = pc.match_substring_regex(raw.take(pa.array(rows)), _PYTHON_DECIDES)
    return pc.replace_with_mask(pa.repeat(pa.scalar(False), n), pa.array(has_hint), exact)


def _python_judge(line: bytes, require_id: bool) -> tuple[str | None, str | None, str | None]:
    record, reason = parse_json_record(line)
    if record is None:
        return record_id(line), None, reason
    post_id = record.get("id")
    if post_id is None:
        return (None, None, NO_ID) if require_id else (None, record["text"], None)
    return str(post_id), record["text"], None


def record_id(line: bytes) -> str | None:
    """The id of a rejected record, when it has one a quarantine row can keep (a string
    that is valid Unicode, or an integer), else None."""
    try:
        record = json.loads(line.decode("utf-8").removeprefix("\ufeff"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    post_id = record.get("id") if isinstance(record, dict) else None
    if isinstance(post_id, bool) or not isinstance(post_id, str | int):
        return None
    text = str(post_id)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 writer takes it
        return None
    return text
