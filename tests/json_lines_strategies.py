"""Hypothesis strategies for landing-file lines, good and bad in every way a producer can
get them wrong; shared by the ingest, stream and line-judge tests."""

from __future__ import annotations

import json
import re

from hypothesis import strategies as st

IDS = st.one_of(
    st.sampled_from(["a", "b", "c", "7", "x y", "", " ", "\u3000", "\x1c"]), st.integers(0, 5)
)
WORDS = st.sampled_from(
    ["white", "house", "vote", "Obama", "#news", "@bob", "https://t.co/x", "Info", "NaN"]
)
TEXTS = st.one_of(
    st.lists(WORDS, min_size=1, max_size=6).map(" ".join),
    # whitespace as Python and Arrow may define it differently, and odd characters
    st.text(st.sampled_from(" \t\x1c\x1f\x85\xa0\u2028\u3000\u200bab\x00é😀"), max_size=6),
)
TIMESTAMPS = st.sampled_from(
    [
        "2026-02-03T10:00:00Z",
        "Wed Oct 10 20:19:24 +0000 2018",
        "not a date",
        "2026-13-45T99:00:00",
        "+999999-01-01T00:00:00",
        "0000-00-00",
        "",
    ]
)
WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["k", "v"]), st.integers(), max_size=2),
)
# raw JSON fragments json.dumps cannot produce: literals one parser reads and another
# does not, escapes of lone and paired surrogates, duplicate keys
ODD_VALUES = st.sampled_from(
    ["Inf", "-Inf", "Infinity", "NaN", "nan", '"\\ud800"', '"\\ud83d\\ude00"', "1e400", "01"]
)


@st.composite
def records(draw: st.DrawFn) -> bytes:
    """One line's bytes, good or bad in one of the ways a landing file can be."""
    record: dict[str, object] = {}
    if draw(st.booleans()):
        record["id"] = draw(st.one_of(IDS, WRONG)) if draw(st.booleans()) else draw(IDS)
    record["text"] = draw(TEXTS) if draw(st.integers(0, 4)) else draw(WRONG)
    if draw(st.booleans()):
        record["created_at"] = draw(st.one_of(TIMESTAMPS, WRONG))
    if draw(st.booleans()):  # unknown and nested fields
        record["user"] = {"name": "x", "tags": [1, {"deep": [None]}]}
    body = json.dumps(record, ensure_ascii=draw(st.booleans()))
    kind = draw(st.integers(0, 13))
    if kind == 0:
        return b"{not json" + draw(st.binary(max_size=5)).replace(b"\n", b"").replace(b"\r", b"")
    if kind == 1:
        return json.dumps(draw(st.one_of(st.lists(st.integers()), st.integers(), TEXTS))).encode()
    if kind == 2:
        return body.encode()[:-1] + b"\xff\xfe}"  # invalid UTF-8
    if kind == 3:
        return b"\xef\xbb\xbf" + body.encode()  # byte-order mark
    if kind == 4:
        return draw(st.sampled_from([b"", b"   ", b"\t \x0b", b"\x0c"]))  # blank lines
    if kind == 5:  # an odd literal in some field
        field = draw(st.sampled_from(["id", "text", "extra"]))
        return (body[:-1] + f', "{field}": {draw(ODD_VALUES)}}}').encode()
    if kind == 6:  # two records on one line
        return (body + body).encode()
    if kind == 7:  # padding around the record
        return (draw(st.sampled_from([" ", "\t", "\x0b"])) + body + " ").encode()
    return body.encode()


@st.composite
def landing_files(draw: st.DrawFn) -> list[bytes]:
    """1-3 files of such lines with LF, CRLF or lone CR line ends, some with no last end."""
    files = []
    for _ in range(draw(st.integers(1, 3))):
        lines = draw(st.lists(records(), min_size=0, max_size=12))
        ends = draw(
            st.lists(
                st.sampled_from([b"\n", b"\r\n", b"\r"]), min_size=len(lines), max_size=len(lines)
            )
        )
        body = b"".join(line + end for line, end in zip(lines, ends, strict=True))
        if draw(st.booleans()) and body:  # no final line break
            body = body[: -len(ends[-1])]
        files.append(body)
    return files


def count_lines(content: bytes) -> int:
    """Lines as Spark's text source and the ingest split them (LF, CRLF, lone CR)."""
    pieces = re.split(rb"\r\n|\r|\n", content)
    return len(pieces) - (1 if pieces and pieces[-1] == b"" else 0)
