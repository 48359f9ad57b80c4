"""``bench chain``: subscriptions drawn from the corpus' own posts, and the whole chain's
per-step figures (a small run in the spark tier)."""

from __future__ import annotations

import csv
import gzip
import json
import time

import pytest

from benchmarks import chain
from core.corpus.synthetic import SyntheticCorpusSpec
from core.errors import S3TMError
from core.text import normalize
from spark_jobs.lake.corpus_files import write_demo_corpus


def _landing(tmp_path, n_posts: int = 2_000):
    landing = tmp_path / "landing"
    write_demo_corpus(
        landing, SyntheticCorpusSpec(n_posts=n_posts, seed=4), days=2, posts_per_file=500
    )
    return landing


def test_subscriptions_are_the_first_words_of_posts_and_seeded(tmp_path):
    landing = _landing(tmp_path)
    phrases = chain.subscription_phrases(landing, 50, seed=1)
    assert phrases == chain.subscription_phrases(landing, 50, seed=1)
    assert len(phrases) == 50
    with gzip.open(sorted(landing.glob("*.jsonl.gz"))[0], "rt") as lines:
        firsts = [normalize(json.loads(line)["text"]) for line in lines]
    every_fifth = [words for words in firsts[:: chain.SUBSCRIPTION_EVERY] if words]
    for phrase, words in zip(phrases, every_fifth, strict=False):
        taken = phrase.split()
        assert 1 <= len(taken) <= 3 and taken == words[: len(taken)]
    with pytest.raises(S3TMError, match="gave"):
        chain.subscription_phrases(landing, 10_000, seed=1)


@pytest.mark.spark
def test_the_chain_reports_every_step_with_measured_figures(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(chain, "POSTS_PER_FILE", 1_000)
    config = chain.ChainConfig(
        posts=3_000,
        subscriptions=100,
        nodes=4,
        algorithm="salb2",
        master="local[1]",
        workdir=tmp_path / "work",
        out=tmp_path / "out",
    )
    started = time.perf_counter()
    rows = chain.run(config)
    wall_s = time.perf_counter() - started
    steps = [r["step"] for r in rows]
    assert steps == [
        *("ingest", "normalise", "graph", "learn", "place"),
        *("evaluate", "validate", "publish", "total"),
    ]
    seconds = {str(r["step"]): float(str(r["wall_s"])) for r in rows}
    assert all(s >= 0 for s in seconds.values())
    total = float(str(rows[-1]["wall_s"]))
    assert total == pytest.approx(sum(float(str(r["wall_s"])) for r in rows[:-1]), abs=0.01)
    # the steps with work in them were timed, all within the chain's own wall time
    assert 0.0 < min(seconds["ingest"], seconds["learn"], seconds["evaluate"]) <= total <= wall_s
    with (config.out / "chain_scale.csv").open() as written:
        assert [r["step"] for r in csv.DictReader(written)] == steps
    assert (config.workdir / "landing-3000-0.complete").exists()
    assert "the chain at 3,000 posts" in capsys.readouterr().out
