"""``stream.health``: the figures of each batch against a slow, obvious recomputation from
the landed posts, and the sketch's hot words after an injected burst."""

from __future__ import annotations

import numpy as np
import pytest

from core.corpus.synthetic import pseudo_word
from core.learn import learn_mapping
from core.routing.hashing import hash_matcher
from spark_jobs.jobs.place import place_version
from spark_jobs.jobs.publish import publish
from spark_jobs.lake.routing_store import register_table
from spark_jobs.lake.subscription_store import register_word_sets
from tests.spark_jobs.stream.harness import active_subscriptions, run_to_end, stream_config

N = 4


def _reference_loads(posts, words_of, dictionary, matcher_of) -> tuple[list[int], list[int]]:
    """Per matcher, the posts sent to it: a post once per distinct matcher of its words."""
    loads, hash_loads = [0] * N, [0] * N
    for post in posts:
        words = words_of[post] & dictionary
        for m in {matcher_of(w) for w in words}:
            loads[m] += 1
        for m in {hash_matcher(w, N) for w in words}:
            hash_loads[m] += 1
    return loads, hash_loads


def test_health_rows_equal_an_offline_recomputation_and_a_burst_is_reported(
    lakehouse, scene, tmp_path
):
    landing = scene
    burst = pseudo_word(50_000)  # a word the learning corpus never had
    register_word_sets(lakehouse, [burst], [[burst]], "news-desk")
    learned = learn_mapping(landing.corpus, N, "salb", split=False, seed=1)
    table = learned.table
    version = register_table(lakehouse, table, algorithm="salb")
    place_version(lakehouse, version, unit_cost=True)
    assert publish(lakehouse, version, skip_validation=True)["changed"]
    batches = [landing.write(500), landing.write(500)]
    # the burst: most posts of the third file carry the new word
    texts = tuple(f"{burst} breaking {k}" for k in range(400))
    batches.append(landing.write(200, texts=texts))

    args = stream_config(tmp_path, landing, health_window=1)
    run_to_end(lakehouse, args)

    rows = sorted(lakehouse.read_arrow("stream.health").to_pylist(), key=lambda r: r["batch_id"])
    assert [r["batch_id"] for r in rows] == [0, 1, 2]
    dictionary = set().union(*active_subscriptions(lakehouse).values())

    def matcher_of(word: str) -> int:
        if word in table.word_index:
            return int(table.version_matchers(word)[0])
        return hash_matcher(word, N)

    for row, posts in zip(rows, batches, strict=True):
        loads, hash_loads = _reference_loads(posts, landing.words, dictionary, matcher_of)
        assert row["routing_version"] == version and row["n_matchers"] == N
        assert row["posts"] == len(posts)
        assert row["loads"] == loads and row["hash_loads"] == hash_loads
        assert row["relative_throughput"] == pytest.approx(max(hash_loads) / max(loads))
        assert row["imbalance"] == pytest.approx(max(loads) / np.mean(loads))
        assert 0 < row["sketch_bytes"] <= 1 << 20
        assert row["split_threshold"] == pytest.approx(1 / (2 * N))
    assert all(h["word"] != burst for r in rows[:2] for h in r["hot_words"])
    reported = {h["word"]: h for h in rows[2]["hot_words"]}
    assert burst in reported
    assert reported[burst]["mapped"] is False and reported[burst]["versions"] == 1
    # the sketch overestimates, never under: the share is at least the true one
    occurrences = sum(len(landing.words[p] & dictionary) for p in batches[2])
    assert reported[burst]["share"] >= 400 / occurrences
