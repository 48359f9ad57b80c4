"""The line judge's numba fast path: it vouches for the flat string-field objects the stream
carries, with Python's id and text, and leaves every line it is not sure of to the others."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import json_lines
from core.corpus.records import MAX_TEXT_CHARS
from tests.core.test_json_lines import reference
from tests.hypothesis_tiers import examples

# every kind of code point a text can hold: surrogates (as escapes), controls, white space
TEXT = st.text(
    st.one_of(
        st.characters(blacklist_categories=["Cs"]),
        st.sampled_from(' \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000\x00"\\/'),
    ),
    max_size=12,
)


def _fast(lines: list[bytes]) -> json_lines.JudgedLines:
    fast = json_lines._fast_judge(pa.array(lines, pa.binary()))
    assert fast is not None
    return fast


@st.composite
def flat_records(draw: st.DrawFn) -> bytes:
    """A flat object of string fields as producers write it, in any spacing and escaping."""
    fields = {"id": draw(TEXT), "text": draw(TEXT)}
    for key in draw(st.lists(st.sampled_from(["source", "split", "created_at", ""]))):
        fields[key] = draw(TEXT)
    keys = draw(st.permutations(list(fields)))
    space = draw(st.sampled_from(["", " ", "\t", "  \r"]))
    ascii_only = draw(st.booleans())
    body = ("," + space).join(
        f"{json.dumps(k)}{space}:{space}{json.dumps(fields[k], ensure_ascii=ascii_only)}"
        for k in keys
    )
    return (space + "{" + space + body + space + "}" + space).encode()


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(flat_records(), min_size=1, max_size=20))
def test_flat_records_are_judged_as_python_judges_them(lines):
    fast = _fast(lines)
    judged = json_lines.judge_lines(pa.array(lines, pa.binary()))
    for i, line in enumerate(lines):
        want = reference(line, True)
        got = (judged.post_id[i].as_py(), judged.text[i].as_py(), judged.reason[i].as_py())
        assert got == want
        vouched = fast.reason[i].as_py() is None
        if vouched:  # what the kernel says is the verdict itself
            assert (fast.post_id[i].as_py(), fast.text[i].as_py(), None) == want
        else:  # a flat record of strings is left to the other paths only to be rejected
            assert want[2] is not None


def test_the_fast_path_reads_the_streams_posts_and_escapes():
    lines = [
        b'{"id": "1", "text": "plain words"}',
        b'{"text": "caf\\u00e9 \\ud83d\\ude00 \\"q\\" a\\/b\\n", "id": "2", "source": "x"}',
        '{"id":"3","text":"déjà vu 😀"}'.encode(),
        b' { "id" : "4" , "text" : "spaced" } ',
    ]
    fast = _fast(lines)
    assert fast.reason.null_count == len(lines)
    assert fast.post_id.to_pylist() == ["1", "2", "3", "4"]
    assert fast.text.to_pylist() == [
        "plain words",
        'café \U0001f600 "q" a/b\n',
        "déjà vu 😀",
        "spaced",
    ]


def test_what_the_fast_path_leaves_to_the_other_paths():
    lines = [
        b'{"id": 5, "text": "an integer id"}',
        b'{"id": "6", "text": "x", "user": {"name": "n"}}',
        b'{"id": "7", "text": "lone \\ud800"}',
        b'{"id": "8", "text": "a", "text": "b"}',
        b'\xef\xbb\xbf{"id": "9", "text": "bom"}',
        b'{"id": "10", "text": "bad \xff byte"}',
        b'{"id": "11", "text": "   "}',
        b'{"id": "12", "text": "\\u3000"}',
        b'{"id": "13", "text": "x"} {"id": "14", "text": "y"}',
        b'{"id": "15", "text": "x", "n": NaN}',
        b'{"te\\u0078t": "escaped key", "id": "16"}',
        b'{"id": "17", "text": "raw\ttab"}',
        b'{"id": "18", "text": "overlong \xc0\xaf"}',
        b'{"id": "19", "text": "surrogate \xed\xa0\x80"}',
        json.dumps({"id": "20", "text": "x" * (MAX_TEXT_CHARS + 1)}).encode(),
        b"",
    ]
    fast = _fast(lines)
    assert fast.reason.to_pylist() == [json_lines._UNDECIDED] * len(lines)
    judged = json_lines.judge_lines(pa.array(lines, pa.binary()))
    got = list(
        zip(
            judged.post_id.to_pylist(),
            judged.text.to_pylist(),
            judged.reason.to_pylist(),
            strict=True,
        )
    )
    assert got == [reference(line, True) for line in lines]


def test_a_null_line_is_never_vouched_for():
    lines = pa.array([b'{"id": "1", "text": "a"}', None], pa.binary())
    fast = json_lines._fast_judge(lines)
    assert fast is not None
    assert fast.reason.to_pylist() == [None, json_lines._UNDECIDED]
    assert json_lines.judge_lines(lines).reason.to_pylist() == [None, json_lines.BLANK_LINE]


def test_a_sliced_batch_is_read_at_its_offset():
    lines = pa.array([b'{"id": "a", "text": "first"}', b'{"id": "b", "text": "second"}'])
    fast = json_lines._fast_judge(lines.slice(1))
    assert fast is not None
    assert fast.text.to_pylist() == ["second"]
    assert np.asarray(fast.reason.is_null()).all()
