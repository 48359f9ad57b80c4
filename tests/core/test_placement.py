"""LASP and random anycast, the cost-model fit, workloads and the measured replay."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from core.corpus import corpus_from_word_lists, holdout_mask
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.errors import InvalidArgumentError
from core.learn import learn_mapping
from core.placement.cost import fit_cost_model
from core.placement.lasp import CostModel, Placement, moved_subscriptions, place_subscriptions
from core.replay import replay
from core.routing.table import RoutingTable
from core.subscriptions.workloads import (
    as_workload,
    fit_topics,
    parse_workloads,
    topic_subscriptions,
    tweet_subscriptions,
)


@pytest.fixture(scope="module")
def setup():
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=8000, n_words=3000, seed=11))
    mask = holdout_mask(corpus.n_posts, 0.25, 3)
    training, held_out = corpus.select(~mask), corpus.select(mask)
    topics = fit_topics(training, n_topics=12, max_iter=2, seed=0)
    workloads = {
        "tweet": tweet_subscriptions(training, 800, seed=1),
        "topic": topic_subscriptions(training, topics, 1500, seed=2),
    }
    return training, held_out, workloads


def _words(subs) -> set[str]:
    return set(subs.vocabulary[np.unique(subs.indices)].tolist())


def _sub_words(corpus, row: int) -> np.ndarray:
    return corpus.indices[corpus.indptr[row] : corpus.indptr[row + 1]]


def _brute_force_pairs(subs, posts) -> set[tuple[int, int]]:
    """(post row, subscription row) of every subscription whose words a post holds."""
    post_sets = [set(_sub_words(posts, p).tolist()) for p in range(posts.n_posts)]
    return {
        (p, r)
        for r in range(subs.n_posts)
        for p, words in enumerate(post_sets)
        if set(_sub_words(subs, r).tolist()) <= words
    }


@pytest.mark.parametrize("workload", ["tweet", "topic"])
@pytest.mark.parametrize(("algorithm", "split"), [("hash", False), ("salb", True)])
def test_every_placement_is_eligible_and_replay_is_exact(setup, workload, algorithm, split):
    training, held_out, workloads = setup
    subs = workloads[workload]
    table = learn_mapping(training, 8, algorithm, split=split, subscribed_words=_words(subs)).table
    placement = place_subscriptions(table, subs, policy="lasp")
    for row in range(subs.n_posts):
        words = [
            str(w) for w in subs.vocabulary[subs.indices[subs.indptr[row] : subs.indptr[row + 1]]]
        ]
        placed = placement.matchers[placement.indptr[row] : placement.indptr[row + 1]].tolist()
        regular = [w for w in words if len(table.version_matchers(w)) == 1]
        if regular:
            assert len(placed) == 1
            assert placed[0] in {int(table.version_matchers(w)[0]) for w in regular}
        else:  # all split words: every version of the one with the fewest versions
            fewest = min(words, key=lambda w: len(table.version_matchers(w)))
            assert set(placed) == set(table.version_matchers(fewest).tolist())
    # Replay = brute-force containment over the held-out posts.
    result = replay(table, placement, subs, held_out, repeats=1)
    assert {tuple(x) for x in result.match_pairs.tolist()} == _brute_force_pairs(subs, held_out)
    assert result.matcher_seconds.shape == (8,)
    assert result.throughput == pytest.approx(held_out.n_posts / result.matcher_seconds.max())


def test_replay_times_every_matcher_that_has_work_and_refuses_bad_timing_arguments(setup):
    training, held_out, workloads = setup
    subs = workloads["tweet"]
    table = learn_mapping(training, 8, "salb", subscribed_words=_words(subs)).table
    placement = place_subscriptions(table, subs, policy="lasp")
    once = replay(table, placement, subs, held_out, repeats=1, min_sample_seconds=0)
    rounds = replay(table, placement, subs, held_out, repeats=3, min_sample_seconds=0.002)
    # timing changes no count: the same matches and work however often a matcher is timed
    assert np.array_equal(once.match_pairs, rounds.match_pairs)
    assert np.array_equal(once.matcher_operations, rounds.matcher_operations)
    has_subs = np.diff(placement.subscriptions_by_matcher()[0]) > 0
    has_work = has_subs & (rounds.matcher_posts > 0)
    assert has_work.any()
    # timed exactly where there is work
    assert np.array_equal(rounds.matcher_seconds > 0, has_work)
    assert rounds.throughput == pytest.approx(held_out.n_posts / rounds.matcher_seconds.max())
    # counted work: each matcher's lookups and the matches it emitted
    # a multicast subscription's match is emitted by each matcher it is on
    assert rounds.match_pairs.shape[0] == len(_brute_force_pairs(subs, held_out))
    assert rounds.matcher_matches.sum() >= rounds.match_pairs.shape[0]
    busiest = (rounds.matcher_operations + rounds.matcher_matches).max()
    assert rounds.work_throughput == pytest.approx(held_out.n_posts / busiest)
    with pytest.raises(InvalidArgumentError, match="min_sample_seconds"):
        replay(table, placement, subs, held_out, min_sample_seconds=-1.0)
    with pytest.raises(InvalidArgumentError, match="repeats"):
        replay(table, placement, subs, held_out, repeats=0)
    with pytest.raises(InvalidArgumentError, match="timing_posts"):
        replay(table, placement, subs, held_out, timing_posts=0)
    with pytest.raises(InvalidArgumentError, match="chunk_posts"):
        replay(table, placement, subs, held_out, chunk_posts=0)


@pytest.mark.parametrize("workload", ["tweet", "topic"])
def test_replay_counts_the_same_in_any_chunk_size_and_times_a_sample(setup, workload):
    """Counting in chunks of posts (what lets evaluate replay millions) changes no figure;
    timing on the first posts changes only the timing."""
    training, held_out, workloads = setup
    subs = workloads[workload]
    learned = learn_mapping(training, 8, "salb", subscribed_words=_words(subs)).table
    # the 40 most frequent words split in three: subscriptions of only those are multicast
    frame = learned.to_frame()
    hot = set(held_out.vocabulary[np.argsort(-held_out.word_frequencies)[:40]].tolist())
    rows = [
        (w, part, (int(m) + part) % 8)
        for w, m in zip(frame["word"], frame["matcher_id"], strict=True)
        for part in range(3 if w in hot else 1)
    ]
    table = RoutingTable.from_rows(*zip(*rows, strict=True), 8, subscribed_words=_words(subs))
    placement = place_subscriptions(table, subs, policy="lasp")
    whole = replay(table, placement, subs, held_out, repeats=1, chunk_posts=held_out.n_posts)
    assert whole.n_matches == whole.match_pairs.shape[0] == len(_brute_force_pairs(subs, held_out))
    assert whole.timed_posts == held_out.n_posts
    for chunk in (1, 7, 333, held_out.n_posts + 5):
        chunked = replay(
            table, placement, subs, held_out, repeats=1, chunk_posts=chunk, timing_posts=250
        )
        assert np.array_equal(chunked.match_pairs, whole.match_pairs)
        assert chunked.n_matches == whole.n_matches
        assert np.array_equal(chunked.matcher_operations, whole.matcher_operations)
        assert np.array_equal(chunked.matcher_matches, whole.matcher_matches)
        assert np.array_equal(chunked.matcher_posts, whole.matcher_posts)
        assert chunked.timed_posts == 250
        assert chunked.throughput == pytest.approx(250 / chunked.matcher_seconds.max())
    counted_only = replay(
        table, placement, subs, held_out, repeats=1, keep_pairs=False, chunk_posts=97
    )
    assert counted_only.match_pairs is None
    assert counted_only.n_matches == whole.n_matches
    # counted per trie node, not listed: the same lookups and matches per matcher
    assert np.array_equal(counted_only.matcher_operations, whole.matcher_operations)
    assert np.array_equal(counted_only.matcher_matches, whole.matcher_matches)
    # the count without pairs dedupes what multicast subscriptions emit twice
    only_hot = sum(set(subs.vocabulary[_sub_words(subs, r)].tolist()) <= hot
                   for r in range(subs.n_posts))  # fmt: skip
    assert placement.multicast_count() == only_hot
    assert whole.matcher_matches.sum() > whole.n_matches


@pytest.mark.parametrize("workload", ["tweet", "topic"])
def test_lasp_load_is_not_above_random_anycast(setup, workload):
    training, held_out, workloads = setup
    subs = workloads[workload]
    table = learn_mapping(training, 8, "salb", subscribed_words=_words(subs)).table
    fit = fit_cost_model(subs, held_out, steps=6, sample_posts=1000)
    lasp = place_subscriptions(table, subs, policy="lasp", cost=fit.model)
    anycast = place_subscriptions(table, subs, policy="random", cost=fit.model, seed=4)
    # Total matcher load under the fitted cost f: sum_i f(|H(i)|).
    assert sum(map(fit.model, lasp.unique_words)) <= sum(map(fit.model, anycast.unique_words))


def test_cost_fit_is_a_line_through_measured_points(setup):
    _, held_out, workloads = setup
    fit = fit_cost_model(workloads["tweet"], held_out, steps=6, sample_posts=1000)
    assert fit.unique_words.shape == fit.ops_per_post.shape and fit.unique_words.size >= 4
    assert np.all(np.diff(fit.unique_words) > 0)
    # more distinct words on a matcher, more lookups per post: the least-squares line
    assert fit.ops_per_post[-1] > fit.ops_per_post[0]
    slope, intercept = np.polyfit(fit.unique_words, fit.ops_per_post, 1)
    assert fit.model.slope == pytest.approx(slope) and fit.r_squared > 0.8
    assert fit.model.intercept == pytest.approx(max(0.0, intercept))  # no negative cost


def test_topic_workload_shape(setup):
    training, _, workloads = setup
    subs = workloads["topic"]
    lengths = np.diff(subs.indptr)
    assert lengths.min() >= 1 and lengths.max() <= 5
    counts = np.bincount(lengths, minlength=6)[1:]
    assert counts[0] > counts[4]  # Zipf(0.5): short ones more common
    again = topic_subscriptions(
        training, fit_topics(training, n_topics=12, max_iter=2, seed=0), 1500, seed=2
    )
    assert np.array_equal(again.indices, subs.indices)  # seeded and reproducible


def test_placement_rejects_unrouted_words_and_bad_policy():
    corpus = corpus_from_word_lists([["a", "b"], ["c"]])
    table = learn_mapping(corpus, 2, "salb", subscribed_words=["a"]).table
    with pytest.raises(InvalidArgumentError, match="not routed"):
        place_subscriptions(table, corpus)
    with pytest.raises(InvalidArgumentError, match="policy"):
        place_subscriptions(table, corpus, policy="best")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="n_subscriptions"):
        tweet_subscriptions(corpus, 0, seed=0)
    with pytest.raises(InvalidArgumentError, match="steps"):
        fit_cost_model(corpus, corpus, steps=1)
    assert CostModel(2.0, 1.0)(3) == 7.0


def test_tweet_subscriptions_past_the_posts_repeat_every_post_evenly():
    corpus = corpus_from_word_lists([["a", "b"], ["c"], ["d", "e", "f"]])
    few = tweet_subscriptions(corpus, 2, seed=5)
    assert few.n_posts == 2 and len({tuple(few.post_words(s)) for s in range(2)}) == 2  # distinct
    many = tweet_subscriptions(corpus, 8, seed=5)  # 2 whole copies + 2 distinct posts
    assert many.n_posts == 8 and len(set(many.post_ids)) == 8
    drawn = Counter(tuple(sorted(many.post_words(s))) for s in range(8))
    assert set(drawn) == {("a", "b"), ("c",), ("d", "e", "f")}
    assert sorted(drawn.values()) == [2, 3, 3]
    assert np.array_equal(tweet_subscriptions(corpus, 8, seed=5).indices, many.indices)


def test_workload_names_are_checked_where_an_option_gives_them() -> None:
    assert parse_workloads(" topic,tweet ") == ["topic", "tweet"]
    assert as_workload("tweet") == "tweet"
    for text in ("", ",", "tweet,topics"):
        with pytest.raises(InvalidArgumentError, match="--workloads takes tweet and/or topic"):
            parse_workloads(text)
    with pytest.raises(InvalidArgumentError, match="--workload takes tweet or topic, got 'Tweet'"):
        as_workload("Tweet")


def test_a_previous_placement_keeps_subscriptions_whose_matcher_stays_eligible(setup) -> None:
    training, _, workloads = setup
    subs = workloads["tweet"]
    words = _words(subs)
    table = learn_mapping(training, 8, "salb2", split=True, subscribed_words=words).table
    first = place_subscriptions(table, subs, cost=CostModel(2.0, 1.0))
    again = place_subscriptions(
        table, subs, cost=CostModel(2.0, 1.0), previous=first.single_matchers()
    )
    assert moved_subscriptions(first.matcher_sets(), again) == 0
    # move a quarter of the words to the next matcher: only the subscriptions that lose
    # their matcher's eligibility move
    frame = table.to_frame()
    rng = np.random.default_rng(0)
    shifted = frame["matcher_id"].to_numpy().copy()
    chosen = rng.random(len(frame)) < 0.25
    shifted[chosen] = (shifted[chosen] + 1) % 8
    moved_table = RoutingTable.from_rows(
        frame["word"], frame["part"], shifted, 8, subscribed_words=words
    )
    after = place_subscriptions(
        moved_table, subs, cost=CostModel(2.0, 1.0), previous=first.single_matchers()
    )
    # the published placement itself as ``previous`` (the place job's columns) keeps the same
    by_columns = place_subscriptions(moved_table, subs, cost=CostModel(2.0, 1.0), previous=first)
    assert np.array_equal(by_columns.indptr, after.indptr)
    assert np.array_equal(by_columns.matchers, after.matchers)
    before = first.single_matchers()
    now = after.matcher_sets()
    must_move = 0
    for k, sub_id in enumerate(after.sub_ids.tolist()):
        sub_words = subs.vocabulary[subs.indices[subs.indptr[k] : subs.indptr[k + 1]]].tolist()
        eligible = {int(m) for w in sub_words for m in moved_table.version_matchers(w).tolist()}
        if sub_id in before and before[sub_id] in eligible and len(eligible) > 0:
            unsplit = [w for w in sub_words if moved_table.version_matchers(w).size == 1]
            if unsplit and before[sub_id] in {
                int(moved_table.version_matchers(w)[0]) for w in unsplit
            }:
                assert now[sub_id] == frozenset({before[sub_id]})
                continue
        must_move += int(now[sub_id] != first.matcher_sets()[sub_id])
    moved = moved_subscriptions(first.matcher_sets(), after)
    assert 0 < moved == must_move < subs.n_posts // 2
    assert moved_subscriptions(first, after) == moved  # on columns, as the place job counts
    fresh = place_subscriptions(moved_table, subs, cost=CostModel(2.0, 1.0))
    assert (
        moved_subscriptions(first.matcher_sets(), fresh) > moved
    )  # without it, LASP re-deals many more


def test_a_previous_placement_needs_the_same_n(setup) -> None:
    training, _, workloads = setup
    subs = workloads["tweet"]
    words = _words(subs)
    four = learn_mapping(training, 4, "salb", subscribed_words=words).table
    eight = learn_mapping(training, 8, "salb", subscribed_words=words).table
    with pytest.raises(InvalidArgumentError, match="N=4"):
        place_subscriptions(four, subs, previous=place_subscriptions(eight, subs).single_matchers())


def _random_placement(rng: np.random.Generator, n_matchers: int) -> Placement:
    sub_ids = rng.permutation(60)[: int(rng.integers(0, 50))].astype(np.int64)
    counts = np.asarray(rng.integers(1, 4, size=sub_ids.shape[0]))
    indptr = np.zeros(sub_ids.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    rows = [rng.choice(n_matchers, size=(int(c),), replace=False) for c in counts]
    matchers = np.concatenate(rows).astype(np.int32) if rows else np.empty(0, np.int32)
    return Placement(n_matchers, sub_ids, indptr, matchers, np.zeros(n_matchers, np.int64))


@pytest.mark.parametrize("seed", range(20))
def test_placements_compared_and_selected_on_columns_equal_the_sets(seed: int) -> None:
    rng = np.random.default_rng(seed)
    before, after = _random_placement(rng, 5), _random_placement(rng, 5)
    sets_before, sets_after = before.matcher_sets(), after.matcher_sets()
    expected = sum(1 for s, m in sets_after.items() if s in sets_before and sets_before[s] != m)
    assert moved_subscriptions(before, after) == expected
    wanted = rng.permutation(60)[:10].astype(np.int64)
    chosen = after.select(wanted)
    if all(int(s) in sets_after for s in wanted):
        assert chosen is not None and chosen.sub_ids.tolist() == wanted.tolist()
        assert chosen.matcher_sets() == {int(s): sets_after[int(s)] for s in wanted}
    else:
        assert chosen is None
    single = after.single_matchers()
    kept = after.kept_matchers(wanted)
    assert kept.tolist() == [single.get(int(s), -1) for s in wanted]


def test_lasp_ties_go_to_the_matcher_holding_the_fewest_subscriptions() -> None:
    """A subscription whose words two eligible matchers already hold adds no word to either
    (utility 0 on both): LASP's tie. It goes to the one holding fewer subscriptions, so
    copies of a popular word set spread over the matchers that can take them instead of
    piling onto the lowest id (whose trie then costs every post more lookups)."""
    table = RoutingTable.from_rows(["a", "b", "c"], [0, 0, 0], [0, 1, 2], 3)
    copies = 101
    subs = corpus_from_word_lists([["a", "b"]] * (copies + 2))
    # the first two sit on matcher 0 and on matcher 1 (as a previous placement left them):
    # both matchers then hold {a, b}
    placement = place_subscriptions(table, subs, previous={0: 0, 1: 1})
    on = Counter(placement.matchers.tolist())
    assert on == {0: 52, 1: 51}, on  # 1 + 51 and 1 + 50: alternating, the lower id first
    # a word set only matcher 0 holds goes there again: adding no word beats adding two,
    # whatever the subscriptions' counts
    twice = corpus_from_word_lists([["a", "b"], ["a", "b"]])
    assert place_subscriptions(table, twice).matchers.tolist() == [0, 0]


def test_replay_bounds_a_chunks_matches_and_counts_the_same(setup, monkeypatch) -> None:
    """Topic-based subscriptions emit many matches a post: with a budget of a few matches
    per chunk the chunks shrink to a post or two, and every figure stays the same."""
    import core.replay

    training, held_out, workloads = setup
    subs = workloads["topic"]
    table = learn_mapping(training, 8, "salb", subscribed_words=_words(subs)).table
    placement = place_subscriptions(table, subs, policy="lasp")
    whole = replay(table, placement, subs, held_out, repeats=1)
    assert whole.n_matches > 10 * held_out.n_posts  # more matches than posts: the budget bites
    monkeypatch.setattr(core.replay, "REPLAY_CHUNK_MATCHES", 25)
    bounded = replay(table, placement, subs, held_out, repeats=1)
    assert bounded.match_pairs is not None and whole.match_pairs is not None
    assert np.array_equal(bounded.match_pairs, whole.match_pairs)
    assert np.array_equal(bounded.matcher_operations, whole.matcher_operations)
    assert np.array_equal(bounded.matcher_matches, whole.matcher_matches)
    # counted without the pairs, and timed in chunks of a few matches: the same counts
    counted = replay(table, placement, subs, held_out, repeats=1, keep_pairs=False)
    assert counted.n_matches == whole.n_matches
    assert np.array_equal(counted.matcher_operations, whole.matcher_operations)
    assert np.array_equal(counted.matcher_matches, whole.matcher_matches)
    assert np.array_equal(counted.matcher_seconds > 0, whole.matcher_seconds > 0)


def test_encoded_subscriptions_equal_the_obvious_loop(setup) -> None:
    """Columns throughout equal mapping each chosen row's words one row at a time."""
    from core.placement.cost import encode_subscriptions, subscription_dictionary

    _, held_out, workloads = setup
    subs = workloads["topic"]
    dictionary = subscription_dictionary(subs, held_out)
    to_id = dictionary.map_vocabulary(subs.vocabulary.tolist())
    rows = np.random.default_rng(5).choice(subs.n_posts, 300, replace=True)
    indptr, words = encode_subscriptions(subs, dictionary, rows)
    for i, r in enumerate(rows.tolist()):
        expected = np.sort(np.asarray(to_id)[subs.indices[subs.indptr[r] : subs.indptr[r + 1]]])
        assert words[indptr[i] : indptr[i + 1]].tolist() == expected.tolist()
    assert indptr[-1] == words.shape[0]


def test_replay_times_each_matcher_on_its_own_past_the_trie_budget(setup, monkeypatch) -> None:
    """Past ``TIMING_TRIE_BYTES`` a matcher is timed as soon as it is counted and its trie
    let go: the same counted figures, and a time for every matcher that had posts."""
    import core.replay

    training, held_out, workloads = setup
    subs = workloads["tweet"]
    table = learn_mapping(training, 8, "salb", subscribed_words=_words(subs)).table
    placement = place_subscriptions(table, subs, policy="lasp")
    kept = replay(table, placement, subs, held_out, repeats=2, min_sample_seconds=0)
    monkeypatch.setattr(core.replay, "TIMING_TRIE_BYTES", 0)
    alone = replay(table, placement, subs, held_out, repeats=2, min_sample_seconds=0)
    assert alone.match_pairs is not None and kept.match_pairs is not None
    assert np.array_equal(alone.match_pairs, kept.match_pairs)
    assert np.array_equal(alone.matcher_operations, kept.matcher_operations)
    # the same matchers timed (those with posts and subscriptions), each of them
    timed = alone.matcher_seconds > 0
    assert timed.sum() >= 6 and np.array_equal(timed, kept.matcher_seconds > 0)
