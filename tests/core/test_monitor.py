"""The word sketch against exact counts, its merge, and routing health against core's
offline metrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidArgumentError
from core.monitor.health import RoutingHealth, hot_words, split_threshold
from core.monitor.sketch import SketchSpec, WordSketch, word_keys
from tests.hypothesis_tiers import examples


def _skewed_stream(seed: int, n_words: int, n_items: int, exponent: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.power(np.arange(1, n_words + 1), exponent)
    return rng.choice(n_words, size=n_items, p=weights / weights.sum())


@settings(max_examples=examples(25), deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_words=st.integers(50, 50_000),
    n_items=st.integers(1, 60_000),
    exponent=st.floats(0.6, 1.6),
    n_parts=st.integers(1, 5),
    phi=st.sampled_from([1 / 32, 1 / 128, 1 / 512]),
)
def test_sketch_finds_every_hot_word_with_few_false_positives(
    seed, n_words, n_items, exponent, n_parts, phi
):
    stream = _skewed_stream(seed, n_words, n_items, exponent)
    keys = word_keys([f"w{i}" for i in range(n_words)])
    spec = SketchSpec(width=1 << 12, depth=4, capacity=1024)
    sketch = WordSketch(spec)
    for part in np.array_split(stream, n_parts):  # updated in batches, as a route task does
        ids, counts = np.unique(part, return_counts=True)
        sketch.add(keys[ids], counts)
    exact = np.bincount(stream, minlength=n_words)
    assert sketch.total == n_items
    # never below the truth
    assert (sketch.estimate(keys) >= exact).all()
    found, estimates = sketch.heavy_hitters(phi)
    truly_hot = set(keys[exact >= phi * n_items].tolist())
    assert truly_hot <= set(found.tolist())  # recall 1
    # false positives: only words within count-min's error bound of the threshold
    error = np.e / spec.width * n_items
    by_key = dict(zip(keys.tolist(), exact.tolist(), strict=True))
    for key in set(found.tolist()) - truly_hot:
        assert by_key[key] >= phi * n_items - error - 1
    assert np.all(np.diff(estimates) <= 0)
    assert sketch.nbytes <= spec.nbytes <= 1 << 20


@settings(max_examples=examples(20), deadline=None)
@given(seed=st.integers(0, 10_000), n_tasks=st.integers(1, 6), n_items=st.integers(1, 30_000))
def test_merge_of_per_task_sketches_equals_the_sketch_of_the_union(seed, n_tasks, n_items):
    stream = _skewed_stream(seed, 5000, n_items, 1.1)
    keys = word_keys([f"w{i}" for i in range(5000)])
    spec = SketchSpec(width=1 << 11, depth=3, capacity=256)
    whole = WordSketch(spec)
    ids, counts = np.unique(stream, return_counts=True)
    whole.add(keys[ids], counts)
    merged = WordSketch(spec)
    for part in np.array_split(stream, n_tasks):
        task = WordSketch(spec)
        task.add(keys[part])
        merged = merged.merge(WordSketch.from_text(task.to_text(), spec))  # as shipped
    assert np.array_equal(merged.counts, whole.counts) and merged.total == whole.total
    for phi in (1 / 16, 1 / 64):  # capacity >= 4 / phi: the hot candidates are the same
        a, b = merged.heavy_hitters(phi), whole.heavy_hitters(phi)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_sketch_rejects_bad_input():
    with pytest.raises(InvalidArgumentError):
        SketchSpec(width=1000).validate()
    with pytest.raises(InvalidArgumentError):
        WordSketch().merge(WordSketch(SketchSpec(seed=1)))
    with pytest.raises(InvalidArgumentError):
        WordSketch().add(np.arange(3, dtype=np.uint64), np.array([1, -1, 1]))
    with pytest.raises(InvalidArgumentError):
        WordSketch.from_text("bm90IGEgc2tldGNo")


def test_hot_words_apply_the_split_rule_per_version():
    words = ["calm", "burst", "split", "rare"]
    keys = word_keys(words)
    sketch = WordSketch(SketchSpec(width=1 << 10, depth=4, capacity=64))
    # N = 4: threshold 1/8 of occurrences
    sketch.add(keys, np.array([300, 300, 300, 100]))  # shares 0.3 each, 0.1
    versions = {"calm": (1, True), "burst": (1, False), "split": (3, True), "rare": (1, True)}
    found = hot_words(sketch, dict(zip(keys.tolist(), words, strict=True)), versions.get, 4)
    # "split" carries 0.1 per version; "rare" is below 1/8
    assert sorted((h.word, h.versions, h.mapped) for h in found) == [
        ("burst", 1, False),
        ("calm", 1, True),
    ]
    assert split_threshold(4) == 0.125


def test_health_equals_core_metrics_on_the_same_posts():
    from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
    from core.learn import learn_mapping
    from core.routing.evaluate import evaluate_table, hash_table
    from core.routing.router import route_corpus

    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=3000, n_words=2000, seed=1))
    table = learn_mapping(corpus, 8, "salb", split=True).table
    version = route_corpus(table, corpus, seed=3)
    hashed = route_corpus(hash_table(8, table.subscribed_words), corpus, seed=3)
    halves = [
        RoutingHealth.of(
            route_corpus(table, part, seed=3),
            route_corpus(hash_table(8, table.subscribed_words), part, seed=3),
        )
        for part in (corpus.select(np.arange(3000) < 1200), corpus.select(np.arange(3000) >= 1200))
    ]
    health = RoutingHealth.of(version, hashed)
    offline = evaluate_table(table, corpus, seed=3)
    assert health.relative_throughput == pytest.approx(offline.relative_throughput)
    assert health.imbalance == pytest.approx(offline.candidate.imbalance)
    assert health.spread == pytest.approx(offline.candidate.spread_routed)
    assert health.hash_spread == pytest.approx(offline.hash_baseline.spread_routed)
    # rows merge by adding loads; split-word choices are seeded per post, not per part
    row_merged = RoutingHealth.from_rows([h.as_row() for h in halves])
    assert np.array_equal(row_merged.hash_loads, health.hash_loads)
    assert row_merged.posts == 3000


def test_monitor_rule_fires_on_drop_hot_word_or_missing_version_only():
    from core.monitor.decide import HEALTHY, NO_DATA, REMAP, decide

    def health(top: int, hash_top: int) -> RoutingHealth:
        return RoutingHealth(100, np.array([top, 10]), np.array([hash_top, 10]), 100, 100)

    base = dict(has_version=True, has_posts=True, split_threshold=0.125, max_drop=0.1)
    calm = decide(live=health(50, 90), reference=1.9, hot_words=[], **base)
    assert calm.decision == HEALTHY and calm.live_relative_throughput == pytest.approx(1.8)
    dropped = decide(live=health(60, 90), reference=1.9, hot_words=[], **base)
    assert dropped.decision == REMAP and dropped.codes == ["throughput_drop"]
    burst = [{"word": "news", "share": 0.3, "versions": 1, "mapped": False}]
    hot = decide(live=health(50, 90), reference=1.9, hot_words=burst, **base)
    assert hot.codes == ["hot_word"] and "never saw" in hot.conditions[0]
    assert decide(live=None, reference=1.9, hot_words=[], **base).decision == NO_DATA
    fresh = decide(**(base | {"has_version": False}), live=None, reference=None, hot_words=[])
    assert fresh.codes == ["no_version"]
    with pytest.raises(InvalidArgumentError):
        decide(**(base | {"max_drop": 1.0}), live=None, reference=None, hot_words=[])


def test_the_monitor_judges_by_counted_work_not_the_model():
    """The model's relative throughput improves while the busiest matcher's counted work per
    post grows: the version got worse by the measure the publish gate uses, and the monitor
    says so; with no counted work in the rows the model decides, and the condition says so."""
    from core.monitor.decide import HEALTHY, REMAP, decide

    better_model = RoutingHealth(100, np.array([40, 10]), np.array([90, 10]), 100, 100)
    assert better_model.relative_throughput > 1.9  # x2.25 of hash, above 1.9 at publish
    base = dict(has_version=True, has_posts=True, split_threshold=0.125, max_drop=0.1)
    worse = decide(
        live=better_model, reference=1.9, hot_words=[], live_work=0.8, reference_work=1.0, **base
    )
    assert worse.decision == REMAP and worse.codes == ["throughput_drop"]
    assert "matcher work" in worse.conditions[0]
    same = decide(
        live=better_model, reference=1.9, hot_words=[], live_work=0.95, reference_work=1.0, **base
    )
    assert same.decision == HEALTHY
    worse_model = RoutingHealth(100, np.array([60, 10]), np.array([90, 10]), 100, 100)
    old_rows = decide(live=worse_model, reference=1.9, hot_words=[], **base)
    assert old_rows.codes == ["throughput_drop"] and "posts-only model" in old_rows.conditions[0]
