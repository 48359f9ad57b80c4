"""The matcher benchmark's measurement: every kernel must find the same matches, the probe
that ``--compare`` runs in each tree reports the index its tree streams with, and the
side-by-side CSV has the columns the issue names."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time

import numpy as np
import pytest

from benchmarks import compare, matcher
from benchmarks.matcher_probe import checksum
from benchmarks.options import MatcherBench
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.matching.trie import TrieMatcher
from core.subscriptions.workloads import tweet_subscriptions


@pytest.fixture(scope="module")
def scenario() -> matcher.Scenario:
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=5000, n_words=300, seed=4))
    subs = tweet_subscriptions(corpus.select(np.arange(3000)), 2000, seed=4)
    return matcher.encode("small", subs, corpus.select(np.arange(3000, 5000)))


def _brute_force_matches(s: matcher.Scenario) -> int:
    """Subscriptions inside each post, by set containment on the scenario's ids."""
    subs = [set(s.sub_words[s.sub_indptr[i] : s.sub_indptr[i + 1]].tolist())
            for i in range(s.n_subscriptions)]  # fmt: skip
    found = 0
    for p in range(s.n_posts):
        mapped = s.word_map[s.post_words[s.post_indptr[p] : s.post_indptr[p + 1]]]
        post = set(mapped[mapped >= 0].tolist())
        found += sum(sub <= post for sub in subs)
    return found


def test_every_kernel_finds_the_same_matches(scenario):
    started = time.perf_counter()
    run = matcher.run_scenario(scenario, repeats=1)
    wall_s = time.perf_counter() - started
    assert (run.subscriptions, run.posts) == (2000, 2000)
    assert run.matches_per_post == pytest.approx(_brute_force_matches(scenario) / run.posts)
    # the trie and predicate kernels each timed over every post, within the run's wall time
    assert run.posts / run.trie_posts_per_s + run.posts / run.predicate_posts_per_s <= wall_s


def test_a_disagreeing_kernel_fails_the_benchmark(scenario, monkeypatch):
    real = matcher.AccessPredicateMatcher.match

    def drops_one(self, *args):  # type: ignore[no-untyped-def]
        found = real(self, *args)
        return type(found)(found.indptr, np.where(found.sub_ids == found.sub_ids[0], -1,
                                                  found.sub_ids), found.operations)  # fmt: skip

    monkeypatch.setattr(matcher.AccessPredicateMatcher, "match", drops_one)
    with pytest.raises(AssertionError, match="disagree"):
        matcher.run_scenario(scenario, repeats=1)


def test_the_probe_reports_this_trees_index_and_its_matches(scenario, tmp_path):
    saved = tmp_path / "scenario.npz"
    scenario.save(saved)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(compare.TREE / "benchmarks/matcher_probe.py"), str(saved), "1"],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(compare.TREE), "PATH": "/usr/bin:/bin"},
    )
    wall_s = time.perf_counter() - started
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["index"] == "predicate"
    # the probe timed its pass over the posts within its own process's lifetime
    assert scenario.n_posts / figures["posts_s"] <= wall_s
    trie = TrieMatcher()
    trie.insert_many(scenario.sub_ids, scenario.sub_indptr, scenario.sub_words)
    expected = trie.match(scenario.post_indptr, scenario.post_words, scenario.word_map)
    assert figures["matches"] == expected.n_matches
    assert figures["checksum"] == checksum(expected.indptr, expected.sub_ids)


def test_compare_writes_the_side_by_side_csv(scenario, tmp_path, monkeypatch):
    monkeypatch.setattr(matcher, "scenarios", lambda corpus, synthetic_subs: [scenario])
    options = MatcherBench(
        compare="HEAD", synthetic_subscriptions=0, repeats=1, runs=1, out=str(tmp_path)
    )
    rows = compare.compare_matcher(options, None)
    with (tmp_path / "matcher_compare.csv").open() as handle:
        written = list(csv.DictReader(handle))
    assert list(written[0])[:5] == [
        "scenario", "subscriptions", "baseline_posts_s", "new_posts_s", "ratio"
    ]  # fmt: skip
    assert written[0]["subscriptions"] == "2000" and rows[0]["new_index"] == "predicate"
    assert float(written[0]["ratio"]) == pytest.approx(
        int(written[0]["new_posts_s"]) / int(written[0]["baseline_posts_s"]), rel=0.01
    )
