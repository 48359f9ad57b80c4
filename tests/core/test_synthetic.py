from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from core.corpus.synthetic import (
    SyntheticCorpusSpec,
    generate_corpus,
    pseudo_word,
)
from core.errors import InvalidArgumentError
from core.text import ENGLISH_STOP_WORDS, normalize
from spark_jobs.lake.corpus_files import read_corpus, write_demo_corpus


def test_same_spec_same_corpus_other_seed_other_corpus() -> None:
    spec = SyntheticCorpusSpec(n_posts=3000, n_words=5000, seed=4)
    a, b = generate_corpus(spec), generate_corpus(spec)
    assert a.fingerprint() == b.fingerprint()
    other = generate_corpus(SyntheticCorpusSpec(n_posts=3000, n_words=5000, seed=5))
    assert other.fingerprint() != a.fingerprint()


def test_shape_is_zipfian_with_about_eight_words_per_post() -> None:
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=50_000, seed=1))
    assert 7.0 < corpus.n_edges / corpus.n_posts < 9.0
    freq = np.sort(corpus.word_frequencies)[::-1]
    # Heavy head, long tail: the top word is far above the median one.
    assert freq[0] > 100 * np.median(freq)


def test_pseudo_words_are_distinct_fixed_points() -> None:
    words = [pseudo_word(r) for r in range(0, 120_000, 7)]
    assert len(set(words)) == len(words)
    assert not set(words) & ENGLISH_STOP_WORDS
    assert all(normalize(w) == [w] for w in words[:3000])
    with pytest.raises(InvalidArgumentError):
        pseudo_word(-1)


def test_rendered_text_normalises_back_to_the_word_sets(tmp_path: Path) -> None:
    spec = SyntheticCorpusSpec(n_posts=2000, n_words=3000, seed=2)
    path = tmp_path / "demo.jsonl.gz"
    generated = write_demo_corpus(path, spec, days=2)
    with gzip.open(path, "rt") as handle:
        records = [json.loads(line) for line in handle]
    assert records[0]["created_at"] == "2026-01-01T00:00:00Z"
    assert records[-1]["created_at"].startswith("2026-01-02")
    read, report = read_corpus(path)
    assert report.malformed == 0 and read.n_posts == generated.n_posts
    for p in range(0, generated.n_posts, 37):
        assert sorted(read.post_words(p)) == sorted(generated.post_words(p))
    assert read.post_ids is not None and generated.post_ids is not None
    assert read.post_ids.tolist() == generated.post_ids.tolist()


@pytest.mark.parametrize("field", ["n_posts", "n_words", "n_topics", "words_per_topic"])
def test_bad_spec_is_rejected(field: str) -> None:
    with pytest.raises(InvalidArgumentError, match=field):
        generate_corpus(SyntheticCorpusSpec(**{"n_posts": 10, field: 0}))  # type: ignore[arg-type]


def test_write_demo_corpus_rejects_bad_days(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="days"):
        write_demo_corpus(tmp_path / "x.jsonl", SyntheticCorpusSpec(n_posts=10), days=0)


@pytest.mark.parametrize("posts_per_file", [1, 333, 1000, 5000])
def test_a_landing_directory_holds_the_lines_of_the_one_file_in_order(
    tmp_path: Path, posts_per_file: int
) -> None:
    spec = SyntheticCorpusSpec(n_posts=1000, seed=4, days=3)
    write_demo_corpus(tmp_path / "one.jsonl", spec)
    seen: list[tuple[str, int]] = []
    write_demo_corpus(
        tmp_path / "landing",
        spec,
        posts_per_file=posts_per_file,
        progress=lambda file, posts: seen.append((file.name, posts)),
    )
    files = sorted((tmp_path / "landing").iterdir())
    assert [f.name for f in files] == [name for name, _ in seen]
    assert len(files) == -(-1000 // posts_per_file)
    assert seen[-1][1] == 1000
    lines = [
        line for f in files for line in gzip.decompress(f.read_bytes()).decode().splitlines(True)
    ]
    assert lines == (tmp_path / "one.jsonl").read_text(encoding="utf-8").splitlines(True)


def test_write_demo_corpus_rejects_bad_posts_per_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="posts_per_file"):
        write_demo_corpus(tmp_path / "d", SyntheticCorpusSpec(n_posts=10), posts_per_file=0)


def _carriers(corpus, word: str) -> np.ndarray:
    word_id = list(corpus.vocabulary).index(word)
    has = np.zeros(corpus.n_posts, dtype=bool)
    post_of_edge = np.repeat(np.arange(corpus.n_posts), np.diff(corpus.indptr))
    has[post_of_edge[corpus.indices == word_id]] = True
    return has


def test_days_drift_topics_and_a_burst_word_appears_on_its_day(tmp_path: Path) -> None:
    from core.corpus.synthetic import burst_word, post_days

    spec = SyntheticCorpusSpec(
        n_posts=28_000, n_words=8000, seed=5, days=7, topic_drift=0.5, burst_days=(3,)
    )
    corpus = generate_corpus(spec)
    assert corpus.fingerprint() == generate_corpus(spec).fingerprint()  # seeded
    day = post_days(spec)
    burst = burst_word(spec, 0)
    assert burst not in {pseudo_word(r) for r in range(spec.n_words)}  # never seen before
    has = _carriers(corpus, burst)
    share = [has[day == d].mean() for d in range(7)]
    assert share[:3] == [0.0, 0.0, 0.0]
    assert 0.12 < share[3] < 0.18 and share[4] < share[3] and share[6] < share[5]
    # on its day the burst word is the hottest word
    on_day = corpus.select(day == 3)
    assert on_day.vocabulary[np.argmax(on_day.word_frequencies)] == burst
    # drift: word popularity moves between the first and the last day
    first, last = corpus.select(day == 0), corpus.select(day == 6)
    top_first = set(first.vocabulary[np.argsort(first.word_frequencies)[::-1][:50]])
    top_last = set(last.vocabulary[np.argsort(last.word_frequencies)[::-1][:50]])
    assert len(top_first & top_last) < 45
    still = generate_corpus(SyntheticCorpusSpec(n_posts=28_000, n_words=8000, seed=5, days=7))
    s_day = post_days(SyntheticCorpusSpec(n_posts=28_000, days=7))
    a, b = still.select(s_day == 0), still.select(s_day == 6)
    stable = set(a.vocabulary[np.argsort(a.word_frequencies)[::-1][:50]]) & set(
        b.vocabulary[np.argsort(b.word_frequencies)[::-1][:50]]
    )
    assert len(stable) > len(top_first & top_last)
    # created_at puts every post on its generated day
    path = tmp_path / "timed.jsonl"
    write_demo_corpus(path, spec)
    days_seen = [
        int(json.loads(line)["created_at"][8:10]) - 1 for line in path.read_text().splitlines()
    ]
    assert np.array_equal(np.array(days_seen), day)
    with pytest.raises(InvalidArgumentError):
        write_demo_corpus(path, spec, days=3)
    with pytest.raises(InvalidArgumentError):
        SyntheticCorpusSpec(n_posts=10, days=2, burst_days=(2,)).validate()
