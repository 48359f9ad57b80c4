"""Corpus records, judged one by one: JSON lines and CSV rows as posts, and posts as a
corpus. Bad records never crash a read and are never dropped silently: each is counted in
the :class:`ReadReport` with its line number and reason. Posts whose text normalises to no
word are counted too and left out of the corpus (they cannot be routed anywhere).

Sources are open binary streams: opening files (gzip or not, JSON lines or CSV) is the lake's
(``spark_jobs.lake.corpus_files``); the one definition of a bad record is here, shared by
the file reader and the Spark ingest job.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Literal

import numpy as np

from core.corpus.arrays import Corpus, corpus_from_word_lists
from core.errors import InputDataError, InvalidArgumentError
from core.text import normalize

log = logging.getLogger(__name__)

CorpusFormat = Literal["auto", "jsonl", "csv"]
MAX_TEXT_CHARS = 10_000  # far above a tweet; longer texts are quarantined as oversized
_EXAMPLES_KEPT = 20
_COMMENT = re.compile(r"#(\s|$)")


@dataclass(frozen=True)
class RawPost:
    """One well-formed input record."""

    line_number: int
    post_id: str
    text: str
    created_at: str | None


@dataclass
class ReadReport:
    """What a read found: counts and the first bad lines with their reasons."""

    path: str
    records: int = 0
    posts: int = 0
    malformed: int = 0
    empty_after_normalisation: int = 0
    duplicate_ids: int = 0
    malformed_examples: list[tuple[int, str]] = field(default_factory=list)

    def add_malformed(self, line_number: int, reason: str) -> None:
        self.malformed += 1
        if len(self.malformed_examples) < _EXAMPLES_KEPT:
            self.malformed_examples.append((line_number, reason))

    def summary(self) -> str:
        lines = [
            f"{self.path}: {self.records} records, {self.posts} posts kept, "
            f"{self.malformed} malformed, {self.empty_after_normalisation} empty after "
            f"normalisation, {self.duplicate_ids} duplicate ids"
        ]
        lines += [f"  line {n}: {reason}" for n, reason in self.malformed_examples]
        if self.malformed > len(self.malformed_examples):
            lines.append(f"  ... and {self.malformed - len(self.malformed_examples)} more")
        return "\n".join(lines)


def _check_text(text: object) -> str | None:
    """The reason a text is unusable, or None."""
    if not isinstance(text, str):
        return f"text is {type(text).__name__}, not a string"
    if not text.strip():
        return "empty text"
    if len(text) > MAX_TEXT_CHARS:
        return f"oversized text ({len(text)} chars > {MAX_TEXT_CHARS})"
    if not _is_unicode(text):
        return "text has a lone surrogate (an escape like \\ud800), not Unicode"
    return None


def _is_unicode(value: str) -> bool:
    # json.loads turns an escaped lone surrogate into a str that no UTF-8 writer accepts
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_json_record(raw: bytes, text_field: str = "text") -> tuple[dict[str, Any] | None, str]:
    """Validate one JSON-lines record: ``(record, "")`` when usable, else ``(None, reason)``.

    The one definition of a bad record, shared by the file reader and the Spark ingest job.
    """
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return None, f"not UTF-8 ({err.reason} at byte {err.start})"
    line = line.removeprefix("\ufeff")  # a byte-order mark (Windows exports) is no content
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        return None, f"invalid JSON ({err.msg})"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    if text_field not in record:
        return None, f"no {text_field!r} field"
    reason = _check_text(record[text_field])
    if reason:
        return None, reason
    post_id = record.get("id")
    # An id names one post: a string or an integer (JSON true is no id, 1.5 no tweet id).
    if post_id is not None and (isinstance(post_id, bool) or not isinstance(post_id, str | int)):
        return None, f"id is {type(post_id).__name__}, not a string or integer"
    if isinstance(post_id, str) and not post_id.strip():
        return None, "empty id"
    if isinstance(post_id, str) and not _is_unicode(post_id):
        return None, "id has a lone surrogate (an escape like \\ud800), not Unicode"
    return record, ""


def jsonl_posts(handle: IO[bytes], report: ReadReport, text_field: str) -> Iterator[RawPost]:
    """The well-formed records of JSON lines, counting bad ones in ``report``."""
    for line_number, raw in enumerate(handle, start=1):
        if not raw.strip():
            continue
        report.records += 1
        record, reason = parse_json_record(raw, text_field)
        if record is None:
            report.add_malformed(line_number, reason)
            continue
        post_id = record.get("id")
        created_at = record.get("created_at")
        yield RawPost(
            line_number,
            str(post_id) if post_id is not None else f"line-{line_number}",
            record[text_field],
            str(created_at) if created_at is not None else None,
        )


def csv_posts(binary: IO[bytes], report: ReadReport, text_column: str) -> Iterator[RawPost]:
    """The well-formed rows of a CSV file, counting bad ones in ``report``.

    Raises:
        InputDataError: the CSV lacks ``text_column``.
    """
    path = report.path
    # surrogateescape keeps bad bytes visible so each row can be judged on its own.
    text_handle = io.TextIOWrapper(binary, encoding="utf-8", errors="surrogateescape", newline="")
    reader = csv.DictReader(text_handle)
    if reader.fieldnames is None or text_column not in reader.fieldnames:
        raise InputDataError(
            f"{path}: CSV has no column {text_column!r} (columns: {reader.fieldnames})"
        )
    for row in reader:
        line_number = reader.line_num
        report.records += 1
        if None in row or any(value is None for value in row.values()):
            report.add_malformed(line_number, "wrong number of fields")
            continue
        text = row[text_column]
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            report.add_malformed(line_number, "not UTF-8")
            continue
        reason = _check_text(text)
        if reason:
            report.add_malformed(line_number, reason)
            continue
        post_id = row.get("id") or f"line-{line_number}"
        yield RawPost(line_number, post_id, text, row.get("created_at") or None)


def corpus_of_posts(
    posts: Iterable[RawPost], report: ReadReport, *, limit: int | None = None
) -> Corpus:
    """Normalise the records of one source (``report`` counts what they held) into a
    corpus of the posts with at least one word; ``limit``: stop after this many.

    Raises:
        InputDataError: no usable post.
    """
    if limit is not None and limit <= 0:
        raise InvalidArgumentError(f"limit must be positive, got {limit}")
    word_lists: list[list[str]] = []
    post_ids: list[str] = []
    seen_ids: set[str] = set()
    for raw in posts:
        words = normalize(raw.text)
        if not words:
            report.empty_after_normalisation += 1
            continue
        if raw.post_id in seen_ids:
            report.duplicate_ids += 1
        seen_ids.add(raw.post_id)
        word_lists.append(words)
        post_ids.append(raw.post_id)
        if limit is not None and len(word_lists) >= limit:
            break
    report.posts = len(word_lists)
    if not word_lists:
        raise InputDataError(f"{report.path}: no usable post\n{report.summary()}")
    if report.malformed:
        log.warning("%s", report.summary())
    return corpus_from_word_lists(word_lists, post_ids)


def parse_times(values: list[str | None]) -> np.ndarray:
    """ISO-8601 times (``Z`` / ``+00:00`` read as UTC; others as written) -> ``datetime64[s]``;
    missing or unreadable ones are NaT."""
    cleaned = []
    for value in values:
        text = (value or "").strip()
        if text.endswith("Z"):
            text = text[:-1]
        elif text.endswith("+00:00"):
            text = text[:-6]
        cleaned.append(text or "NaT")
    out = np.empty(len(cleaned), dtype="datetime64[s]")
    for i, text in enumerate(cleaned):
        try:
            out[i] = np.datetime64(text, "s")
        except ValueError:
            out[i] = np.datetime64("NaT")
    return out


def timed_corpus_of_posts(
    posts: Iterable[RawPost], report: ReadReport
) -> tuple[Corpus, np.ndarray]:
    """:func:`corpus_of_posts` with each kept post's ``created_at`` (``datetime64[s]``,
    NaT when absent or unreadable).

    Raises:
        InputDataError: no usable post.
    """
    word_lists: list[list[str]] = []
    post_ids: list[str] = []
    times: list[str | None] = []
    for raw in posts:
        words = normalize(raw.text)
        if not words:
            report.empty_after_normalisation += 1
            continue
        word_lists.append(words)
        post_ids.append(raw.post_id)
        times.append(raw.created_at)
    report.posts = len(word_lists)
    if not word_lists:
        raise InputDataError(f"{report.path}: no usable post\n{report.summary()}")
    if report.malformed:
        log.warning("%s", report.summary())
    return corpus_from_word_lists(word_lists, post_ids), parse_times(times)


def word_list_of_lines(handle: IO[bytes], name: str) -> list[str]:
    """Subscriptions (phrases), one per line, as their sorted set of normalised words.

    Lines that are '#' alone or '#' then a space are comments ('#tag' is a subscription).
    Each line is normalised like a post, so a line may hold a phrase ("white house"), whose
    words all become subscribed words.

    Raises:
        InputDataError: a line is not UTF-8, or no line holds a word.
    """
    words: set[str] = set()
    for line_number, raw in enumerate(handle, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputDataError(f"{name}:{line_number}: not UTF-8") from err
        line = line.strip()
        # "# note" is a comment; "#tag" is a hashtag subscription.
        if line and not _COMMENT.match(line):
            words.update(normalize(line))
    if not words:
        raise InputDataError(f"{name}: no word after normalisation")
    return sorted(words)
