"""Corpus files: JSON lines or CSV, gzipped or not, read into the records and corpora of
:mod:`core.corpus.records` (which judges each record). The demo's landing files, the real
tweets of ``../shared/data``, a subscription word list."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

import numpy as np

from core.corpus.arrays import Corpus
from core.corpus.records import (
    CorpusFormat,
    RawPost,
    ReadReport,
    corpus_of_posts,
    csv_posts,
    jsonl_posts,
    timed_corpus_of_posts,
    word_list_of_lines,
)
from core.errors import InputDataError, InvalidArgumentError


def open_binary(path: Path) -> IO[bytes]:
    """The file's bytes, gunzipped when it is gzip (by its magic number, not its name)."""
    with path.open("rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def _detect_format(path: Path) -> Literal["jsonl", "csv"]:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    if suffixes and suffixes[-1] == ".csv":
        return "csv"
    return "jsonl"


def iter_raw_posts(
    path: str | Path,
    report: ReadReport,
    *,
    fmt: CorpusFormat = "auto",
    text_column: str = "text",
) -> Iterator[RawPost]:
    """Yield the well-formed records of a JSONL or CSV file, counting bad ones in ``report``.

    Raises:
        InputDataError: if the file does not exist, or a CSV lacks ``text_column``.
        InvalidArgumentError: for an unknown ``fmt``.
    """
    source = Path(path)
    if not source.is_file():
        raise InputDataError(f"corpus file not found: {source}")
    if fmt not in ("auto", "jsonl", "csv"):
        raise InvalidArgumentError(f"format must be auto, jsonl or csv, got {fmt!r}")
    kind = _detect_format(source) if fmt == "auto" else fmt
    with open_binary(source) as handle:
        if kind == "jsonl":
            yield from jsonl_posts(handle, report, text_column)
        else:
            yield from csv_posts(handle, report, text_column)


def read_corpus(
    path: str | Path,
    *,
    fmt: CorpusFormat = "auto",
    text_column: str = "text",
    limit: int | None = None,
) -> tuple[Corpus, ReadReport]:
    """Read and normalise a corpus file.

    Args:
        path: JSONL(.gz) or CSV(.gz) file.
        fmt: ``auto`` decides by extension (``.csv`` -> CSV, else JSON lines).
        text_column: the field/column holding the text.
        limit: stop after this many kept posts.

    Returns:
        The corpus of posts with at least one word, and the read report.

    Raises:
        InputDataError: if the file is missing or yields no usable post.
    """
    if limit is not None and limit <= 0:
        raise InvalidArgumentError(f"limit must be positive, got {limit}")
    report = ReadReport(path=str(path))
    posts = iter_raw_posts(path, report, fmt=fmt, text_column=text_column)
    return corpus_of_posts(posts, report, limit=limit), report


def read_timed_corpus(
    path: str | Path, *, fmt: CorpusFormat = "auto", text_column: str = "text"
) -> tuple[Corpus, np.ndarray, ReadReport]:
    """:func:`read_corpus` with each kept post's ``created_at`` (``datetime64[s]``, NaT when
    absent or unreadable).

    Raises:
        InputDataError: if the file is missing or yields no usable post.
    """
    report = ReadReport(path=str(path))
    posts = iter_raw_posts(path, report, fmt=fmt, text_column=text_column)
    corpus, times = timed_corpus_of_posts(posts, report)
    return corpus, times, report


def read_word_list(path: str | Path) -> list[str]:
    """A subscription word list file (:func:`core.corpus.records.word_list_of_lines`).

    Raises:
        InputDataError: if the file is missing or holds no word.
    """
    source = Path(path)
    if not source.is_file():
        raise InputDataError(f"word list not found: {source}")
    with open_binary(source) as handle:
        return word_list_of_lines(handle, str(source))
