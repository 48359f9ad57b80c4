"""On the real tweets of ../shared/data (skipped with a message when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.corpus import holdout_mask
from core.learn import learn_mapping
from core.routing.evaluate import evaluate_table
from spark_jobs.lake.corpus_files import read_corpus


@pytest.fixture(scope="module")
def tweets(real_corpus: Path):
    corpus, report = read_corpus(real_corpus)
    return corpus, report


def test_corpus_reads_cleanly_with_expected_shape(tweets) -> None:
    corpus, report = tweets
    assert report.records == 140_878 and report.malformed == 0
    assert report.posts + report.empty_after_normalisation == report.records
    # The data README: "about 93k distinct words and about 8 words per post".
    assert 85_000 < corpus.n_words < 120_000
    assert 7.0 < corpus.n_edges / corpus.n_posts < 9.0


def test_salb_split_beats_hash_on_held_out_tweets(tweets) -> None:
    corpus, _ = tweets
    mask = holdout_mask(corpus.n_posts, 0.2, 7)
    training, held_out = corpus.select(~mask), corpus.select(mask)
    learned = learn_mapping(training, 64, "salb", split=True)
    result = evaluate_table(learned.table, held_out)
    assert result.relative_throughput > 1.2
    assert result.candidate.imbalance < result.hash_baseline.imbalance
