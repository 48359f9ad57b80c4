"""Corpus files: JSON lines or CSV, gzipped or not, read into the records and corpora of
:mod:`core.corpus.records` (which judges each record): the demo's landing files, the real
tweets of ``../shared/data``, a subscription word list. And the demo's files written from a
synthetic corpus (:mod:`core.corpus.synthetic`)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
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
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus, render_post_text
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


def write_demo_corpus(
    path: str | Path,
    spec: SyntheticCorpusSpec,
    *,
    start: datetime | None = None,
    days: int | None = None,
    posts_per_file: int | None = None,
    progress: Callable[[Path, int], None] | None = None,
) -> Corpus:
    """Write a synthetic corpus as JSON lines (gzipped when ``path`` ends in ``.gz``).

    Each line holds ``id``, ``text`` and ``created_at``, spread evenly in post order over
    ``days`` days from ``start`` (default 2026-01-01 UTC). ``days`` defaults to the spec's
    when it has time (``spec.days > 1``), else 7; it must equal the spec's then, so every
    post falls on the day it was generated for.

    ``posts_per_file``: ``path`` is a directory, filled with ``posts-00000.jsonl.gz``, ... of
    that many posts each: the same lines as the one file, in order (a landing directory the
    ingest reads in parallel; one file holds one task). ``progress(file, posts_so_far)`` is
    called after each file.

    Returns:
        The generated corpus (the text of line ``i`` normalises to post ``i``'s words).
    """
    if days is None:
        days = spec.days if spec.days > 1 else 7
    if days < 1:
        raise InvalidArgumentError(f"days must be >= 1, got {days}")
    if spec.days > 1 and days != spec.days:
        raise InvalidArgumentError(f"days ({days}) must equal the spec's days ({spec.days})")
    if posts_per_file is not None and posts_per_file < 1:
        raise InvalidArgumentError(f"posts_per_file must be >= 1, got {posts_per_file}")
    corpus = generate_corpus(spec)
    origin = start or datetime(2026, 1, 1, tzinfo=UTC)
    # integer microseconds: post i is on day floor(i * days / n), exactly as generated
    span_us = days * 86_400_000_000
    rng = np.random.default_rng(spec.seed + 1)
    target = Path(path)
    if posts_per_file is None:
        files = [(target, 0, corpus.n_posts)]
    else:
        firsts = range(0, corpus.n_posts, posts_per_file)
        files = [
            (target / f"posts-{i:05d}.jsonl.gz", first, min(first + posts_per_file, corpus.n_posts))
            for i, first in enumerate(firsts)
        ]
    vocabulary = corpus.vocabulary
    for file, first, last in files:
        file.parent.mkdir(parents=True, exist_ok=True)
        opener = gzip.open if file.suffix == ".gz" else open
        with opener(file, "wt", encoding="utf-8") as out:
            for post in range(first, last):
                words = vocabulary[corpus.indices[corpus.indptr[post] : corpus.indptr[post + 1]]]
                record = {
                    "id": corpus.post_ids[post] if corpus.post_ids is not None else str(post),
                    "text": render_post_text(list(words), rng),
                    "created_at": (
                        origin + timedelta(microseconds=post * span_us // corpus.n_posts)
                    )
                    .isoformat()
                    .replace("+00:00", "Z"),
                }
                out.write(json.dumps(record) + "\n")
        if progress is not None:
            progress(file, last)
    return corpus
