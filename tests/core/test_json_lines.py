"""The bulk line judge gives every line the verdict of ``parse_json_record`` (the reference:
one line at a time, Python's json), whichever path (Arrow or Python) decided it."""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus.json_lines import BLANK_LINE, NO_ID, judge_lines
from core.corpus.records import MAX_TEXT_CHARS, parse_json_record
from tests.hypothesis_tiers import examples
from tests.json_lines_strategies import records


def reference(line: bytes | None, require_id: bool) -> tuple[str | None, str | None, str | None]:
    if line is None or not line.strip():
        return None, None, BLANK_LINE
    record, reason = parse_json_record(line)
    if record is None:
        return _id_of_rejected(line), None, reason
    if record.get("id") is None:
        return (None, None, NO_ID) if require_id else (None, record["text"], None)
    return str(record["id"]), record["text"], None


def _id_of_rejected(line: bytes) -> str | None:
    """A quarantine row keeps the id of a JSON object with a string or integer id."""
    try:
        record = json.loads(line.decode("utf-8").removeprefix("\ufeff"))
    except ValueError:
        return None
    if not isinstance(record, dict) or type(record.get("id")) not in (str, int):
        return None
    post_id = str(record["id"])
    return (
        post_id
        if post_id.encode("utf-8", "surrogatepass").decode("utf-8", "ignore") == post_id
        else None
    )


def _judged(lines: list[bytes | None], require_id: bool) -> list[tuple]:
    judged = judge_lines(pa.array(lines, pa.binary()), require_id=require_id)
    return list(
        zip(
            judged.post_id.to_pylist(),
            judged.text.to_pylist(),
            judged.reason.to_pylist(),
            strict=True,
        )
    )


@settings(max_examples=examples(400), deadline=None)
@given(
    lines=st.lists(st.one_of(records(), st.none()), max_size=30),
    require_id=st.booleans(),
)
def test_bulk_verdicts_equal_the_line_by_line_reference(lines, require_id):
    assert _judged(lines, require_id) == [reference(line, require_id) for line in lines]


@settings(max_examples=examples(100), deadline=None)
@given(
    ids=st.lists(st.text(min_size=1, max_size=8).filter(str.strip), min_size=1, max_size=40),
    text=st.text(max_size=20),
)
def test_clean_batches_take_the_arrow_path_with_the_same_result(ids, text):
    lines = [json.dumps({"id": i, "text": f"{text} word"}).encode() for i in ids]
    assert _judged(lines, True) == [reference(line, True) for line in lines]


def test_reasons_name_the_fault():
    lines = [
        b"",
        b"{not json",
        b'{"id": "1"}',
        b'{"id": "2", "text": "   "}',
        json.dumps({"id": "3", "text": "x" * (MAX_TEXT_CHARS + 1)}).encode(),
        b'{"text": "no id"}',
        b'{"id": true, "text": "t"}',
        b'{"id": "4", "text": "\\ud800"}',
        b'{"id": "5", "text": "ok", "x": Inf}',
        b'{"id": 6, "text": "an integer id is a string id"}',
        b'{"id": "7", "text": "fine"}',
    ]
    reasons = [r for _, _, r in _judged(lines, True)]
    assert reasons[0] == BLANK_LINE
    assert reasons[1].startswith("invalid JSON")
    assert reasons[2] == "no 'text' field"
    assert reasons[3] == "empty text"
    assert reasons[4].startswith("oversized text")
    assert reasons[5] == NO_ID
    assert reasons[6].startswith("id is bool")
    assert "lone surrogate" in reasons[7]
    assert reasons[8].startswith("invalid JSON")  # Python's json has no Inf literal
    assert reasons[9:] == [None, None]
    assert _judged(lines, True)[9][:2] == ("6", "an integer id is a string id")


def test_a_line_of_several_megabytes_is_judged_like_any_other():
    huge = json.dumps({"id": "big", "text": "word " * 1_000_000}).encode()
    ok = json.dumps({"id": "ok", "text": "hi"}).encode()
    judged = _judged([huge, ok], True)
    assert judged[0][2].startswith("oversized text") and judged[1] == ("ok", "hi", None)


@settings(max_examples=examples(200), deadline=None)
@given(
    good=st.lists(st.sampled_from(["a b", "tweet text", "\u3000x"]), min_size=1, max_size=5),
    field=st.sampled_from(["id", "text", "extra"]),
    literal=st.sampled_from(
        [
            "Inf",
            "-Inf",
            "Infinity",
            "-Infinity",
            "NaN",
            '"\\ud800"',
            '"\\udc00x"',
            '"\\ud83d\\ude00"',
            '"a\\\\ud800"',
        ]
    ),
)
def test_literals_where_parsers_disagree_get_pythons_verdict(good, field, literal):
    # every other line of the batch is clean, so Arrow reads the batch and must not vouch
    # for the odd line by itself
    lines = [json.dumps({"id": str(k), "text": t}).encode() for k, t in enumerate(good)]
    odd = json.dumps({"id": "odd", "text": "odd one"})[:-1] + f', "{field}": {literal}}}'
    lines.insert(len(lines) // 2, odd.encode())
    assert _judged(lines, True) == [reference(line, True) for line in lines]
