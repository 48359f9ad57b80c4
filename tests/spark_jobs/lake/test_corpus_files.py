from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from core.corpus.records import MAX_TEXT_CHARS
from core.errors import InputDataError, InvalidArgumentError
from spark_jobs.lake.corpus_files import read_corpus, read_word_list


def _write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_jsonl_bad_lines_are_reported_with_line_numbers(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path / "posts.jsonl",
        [
            json.dumps({"id": "1", "text": "white house"}).encode(),
            b"{not json",
            json.dumps({"id": "2"}).encode(),
            b"\xff\xfe broken bytes",
            json.dumps(["a", "list"]).encode(),
            json.dumps({"id": "3", "text": "   "}).encode(),
            json.dumps({"id": "4", "text": "x" * (MAX_TEXT_CHARS + 1)}).encode(),
            json.dumps({"id": "5", "text": 42}).encode(),
            json.dumps({"id": "6", "text": "the and of"}).encode(),  # only stop words
            json.dumps({"id": "1", "text": "green house"}).encode(),
        ],
    )
    corpus, report = read_corpus(path)
    assert [sorted(corpus.post_words(p)) for p in range(corpus.n_posts)] == [
        ["hous", "white"],
        ["green", "hous"],
    ]
    assert corpus.post_ids is not None
    assert corpus.post_ids.tolist() == ["1", "1"]
    assert (report.records, report.posts, report.malformed) == (10, 2, 7)
    assert (report.empty_after_normalisation, report.duplicate_ids) == (1, 1)
    reasons = dict(report.malformed_examples)
    assert reasons[2].startswith("invalid JSON")
    assert reasons[3] == "no 'text' field"
    assert reasons[4].startswith("not UTF-8")
    assert reasons[5] == "not a JSON object"
    assert reasons[6] == "empty text"
    assert reasons[7].startswith("oversized text")
    assert reasons[8] == "text is int, not a string"
    assert "line 2: invalid JSON" in report.summary()


def test_gzipped_jsonl_with_custom_field(tmp_path: Path) -> None:
    path = tmp_path / "posts.data.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write(json.dumps({"body": "Breaking news"}) + "\n")
    corpus, report = read_corpus(path, text_column="body")
    assert sorted(corpus.post_words(0)) == ["break", "new"]
    assert corpus.post_ids is not None
    assert corpus.post_ids.tolist() == ["line-1"]
    assert report.malformed == 0


def test_csv_with_named_column_and_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "posts.csv"
    path.write_bytes(
        b"id,tweet,created_at\n"
        b'a,"Hello, World",2026-01-01\n'
        b"b,too,many,fields\n"
        b"c,\xff\xfe,2026-01-02\n"
        b'd,"multi\nline post",2026-01-03\n'
    )
    corpus, report = read_corpus(path, text_column="tweet")
    assert corpus.post_ids is not None
    assert corpus.post_ids.tolist() == ["a", "d"]
    assert sorted(corpus.post_words(1)) == ["line", "multi", "post"]
    assert report.malformed == 2
    assert {reason for _, reason in report.malformed_examples} == {
        "wrong number of fields",
        "not UTF-8",
    }


def test_csv_without_the_text_column_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "posts.csv"
    path.write_text("id,body\n1,hello\n")
    with pytest.raises(InputDataError, match="no column 'text'"):
        read_corpus(path)


def test_missing_and_useless_files(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="not found"):
        read_corpus(tmp_path / "absent.jsonl")
    empty = _write_lines(tmp_path / "bad.jsonl", [b"{", b"[]"])
    with pytest.raises(InputDataError, match="no usable post"):
        read_corpus(empty)
    with pytest.raises(InvalidArgumentError, match="limit"):
        read_corpus(empty, limit=0)
    with pytest.raises(InvalidArgumentError, match="format"):
        read_corpus(empty, fmt="xml")  # type: ignore[arg-type]


def test_limit_stops_early(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path / "p.jsonl", [json.dumps({"text": f"word{i}"}).encode() for i in range(10)]
    )
    corpus, _ = read_corpus(path, limit=3)
    assert corpus.n_posts == 3


def test_word_list_normalises_phrases_and_skips_comments(tmp_path: Path) -> None:
    path = tmp_path / "subs.txt"
    path.write_text("# my subscriptions\nWhite House\n\n#elections 2026\nthe\n#\n")
    assert read_word_list(path) == ["2026", "elect", "hous", "white"]
    (tmp_path / "empty.txt").write_text("# nothing\nthe of\n")
    with pytest.raises(InputDataError, match="no word"):
        read_word_list(tmp_path / "empty.txt")
