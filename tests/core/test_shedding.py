"""Load shedding: utilities and the spread cap against plain-Python references, kept matches
against brute force, the yield estimate, and the buffer controller on scripted traces."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import holdout_mask
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.errors import InvalidArgumentError
from core.learn import learn_mapping
from core.placement.lasp import place_subscriptions
from core.routing._router_kernels import version_draw
from core.routing.router import route_csr
from core.shedding import _kernels as K
from core.shedding.controller import SheddingController, ideal_fraction
from core.shedding.evaluate import pair_outcomes
from core.shedding.post_value import ValueTable, keep_most_valuable, line_values, word_values
from core.shedding.shedder import (
    LevelLadder,
    cap_spread,
    drop_posts_at_random,
    exempt_posts,
    level_loads,
    pair_load,
    pair_load_of_histogram,
    pair_utilities,
)
from core.shedding.simulate import RateStep, simulate
from core.shedding.yield_stats import YieldObservation, YieldStats, attribution_slots, observe
from core.subscriptions.workloads import tweet_subscriptions
from tests.hypothesis_tiers import examples


# -- what to shed ------------------------------------------------------------------------------
@st.composite
def routed_batches(draw):
    n_matchers = draw(st.integers(1, 9))
    n_words = draw(st.integers(1, 25))
    counts = draw(st.lists(st.integers(1, 3), min_size=n_words, max_size=n_words))
    part_count = np.array(counts, dtype=np.int32)
    part_start = np.concatenate([[0], np.cumsum(part_count[:-1])]).astype(np.int64)
    n_slots = int(part_count.sum())
    part_matchers = np.array(
        draw(st.lists(st.integers(0, n_matchers - 1), min_size=n_slots, max_size=n_slots)),
        dtype=np.int32,
    )
    posts = draw(
        st.lists(st.sets(st.integers(0, n_words - 1), max_size=8), min_size=0, max_size=30)
    )
    indptr = np.zeros(len(posts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in posts], out=indptr[1:])
    word_ids = np.array([w for p in posts for w in sorted(p)], dtype=np.int32)
    weight = np.array(
        draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=n_slots, max_size=n_slots))
    )
    seed = draw(st.integers(0, 1000))
    return n_matchers, part_start, part_count, part_matchers, indptr, word_ids, weight, seed


def _reference_utilities(n, part_start, part_count, part_matchers, indptr, word_ids, weight, seed):
    out: list[dict[int, float]] = []
    for p in range(indptr.shape[0] - 1):
        got: dict[int, float] = {}
        for w in word_ids[indptr[p] : indptr[p + 1]].tolist():
            k = int(part_count[w])
            v = 0 if k == 1 else int(version_draw(seed, p, w) % np.uint64(k))
            slot = int(part_start[w]) + v
            m = int(part_matchers[slot])
            got[m] = got.get(m, 0.0) + float(weight[slot])
        out.append(got)
    return out


@settings(max_examples=examples(150), deadline=None)
@given(routed_batches(), st.sampled_from([1.0, 1.5, 2.0, 3.0, 3.25]))
def test_utilities_and_cap_equal_the_plain_python_reference(batch, max_spread) -> None:
    n, part_start, part_count, part_matchers, indptr, word_ids, weight, seed = batch
    routed = route_csr(indptr, word_ids, part_start, part_count, part_matchers, n, seed=seed)
    utility = pair_utilities(
        indptr,
        word_ids,
        part_start,
        part_count,
        part_matchers,
        routed.indptr,
        routed.matchers,
        n,
        slot_weight=weight,
        seed=seed,
    )
    reference = _reference_utilities(
        n, part_start, part_count, part_matchers, indptr, word_ids, weight, seed
    )
    exempt = exempt_posts(routed.n_posts, 0.2, seed)
    keep = cap_spread(routed.indptr, routed.matchers, utility, max_spread, exempt=exempt, seed=seed)
    whole = int(max_spread)
    for p in range(routed.n_posts):
        pairs = range(routed.indptr[p], routed.indptr[p + 1])
        matchers = [int(routed.matchers[e]) for e in pairs]
        assert {m: utility[e] for m, e in zip(matchers, pairs, strict=True)} == pytest.approx(
            reference[p]
        )
        ranked = sorted(matchers, key=lambda m: (-reference[p][m], m))
        kept = whole + (1 if K.unit_draw(seed, p, K.FRACTION_SALT) < max_spread - whole else 0)
        wanted = set(matchers) if exempt[p] or len(matchers) <= whole else set(ranked[:kept])
        assert {m for m, e in zip(matchers, pairs, strict=True) if keep[e]} == wanted


def test_consensus_counts_owned_words_and_ties_go_to_the_lower_matcher() -> None:
    # words 0,1 -> matcher 2; word 2 -> matcher 0; word 3 -> matcher 1
    part_start = np.arange(4, dtype=np.int64)
    part_count = np.ones(4, dtype=np.int32)
    part_matchers = np.array([2, 2, 0, 1], dtype=np.int32)
    indptr = np.array([0, 4], dtype=np.int64)
    words = np.array([3, 0, 2, 1], dtype=np.int32)
    routed = route_csr(indptr, words, part_start, part_count, part_matchers, 3)
    utility = pair_utilities(
        indptr, words, part_start, part_count, part_matchers, routed.indptr, routed.matchers, 3
    )
    assert dict(zip(routed.matchers.tolist(), utility.tolist(), strict=True)) == {
        2: 2.0,
        0: 1.0,
        1: 1.0,
    }
    keep = cap_spread(routed.indptr, routed.matchers, utility, 2)
    assert sorted(routed.matchers[keep].tolist()) == [0, 2]  # 0 beats 1 on the tie
    assert cap_spread(routed.indptr, routed.matchers, utility, None).all()


def test_levels_caps_and_loads() -> None:
    ladder = LevelLadder()
    assert ladder.max_level == 7
    assert [ladder.cap(level) for level in range(8)] == [None, 7, 6, 5, 4, 3, 2, 1]
    half = LevelLadder(k=7, delta=0.5)
    assert half.max_level == 13 and half.cap(2) == 6.5
    with pytest.raises(InvalidArgumentError):
        ladder.cap(8)
    dropping = LevelLadder(drop_fractions=(0.25, 0.5))
    assert dropping.max_level == 9 and dropping.cap_levels == 7
    assert [dropping.drop(lv) for lv in (0, 7, 8, 9)] == [0, 0, 0.25, 0.5]
    assert dropping.cap(9) == 1
    with pytest.raises(InvalidArgumentError):
        LevelLadder(drop_fractions=(0.5, 0.25))
    moderate = LevelLadder(drop_fractions=(0.25,), drop_cap=4)
    assert moderate.cap(7) == 1 and moderate.cap(8) == 4 and moderate.drop(8) == 0.25
    spreads = np.array([1, 3, 8])
    assert pair_load(spreads, 2.5) == 1 + 2.5 + 2.5
    loads = level_loads(spreads, ladder)
    assert loads[0] == 1.0 and (np.diff(loads) <= 0).all()
    with pytest.raises(InvalidArgumentError):
        cap_spread(np.array([0, 1]), np.array([0], np.int32), np.zeros(1), 0.5)


@given(
    st.lists(st.integers(0, 1000), min_size=1, max_size=20),
    st.sampled_from([None, 1.0, 1.5, 2.0, 4.0, 6.25]),
)
def test_pair_load_of_a_histogram_is_the_pair_load_of_its_posts(counts, cap) -> None:
    spreads = np.repeat(np.arange(len(counts)), counts)
    assert pair_load_of_histogram(np.array(counts), cap) == pytest.approx(pair_load(spreads, cap))


def test_random_drop_and_exempt_draws_are_seeded_and_near_their_rate() -> None:
    a = drop_posts_at_random(100_000, 0.3, 5)
    assert np.array_equal(a, drop_posts_at_random(100_000, 0.3, 5))
    assert abs(1 - a.mean() - 0.3) < 0.01
    e = exempt_posts(100_000, 0.02, 5)
    assert abs(e.mean() - 0.02) < 0.003


# -- against brute force ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def outcomes():
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=6000, n_words=2000, seed=5))
    mask = holdout_mask(corpus.n_posts, 0.3, 1)
    training, held_out = corpus.select(~mask), corpus.select(mask)
    subs = tweet_subscriptions(training, 1500, seed=2)
    words = set(subs.vocabulary[np.unique(subs.indices)].tolist())
    table = learn_mapping(training, 8, "salb", split=True, subscribed_words=words).table
    placement = place_subscriptions(table, subs, policy="lasp")
    half = holdout_mask(held_out.n_posts, 0.5, 2)
    taught = pair_outcomes(table, placement, subs, held_out.select(half), seed=3)
    tested = pair_outcomes(table, placement, subs, held_out.select(~half), seed=3)
    return subs, held_out.select(~half), taught, tested


def _brute_force(subs, posts) -> set[tuple[int, int]]:
    sub_sets = [
        set(subs.vocabulary[subs.indices[subs.indptr[s] : subs.indptr[s + 1]]].tolist())
        for s in range(subs.n_posts)
    ]
    out = set()
    for p in range(posts.n_posts):
        words = set(posts.post_words(p))
        out |= {(p, s) for s, sub in enumerate(sub_sets) if sub <= words}
    return out


@pytest.mark.parametrize("utility", ["consensus", "subscription", "yield"])
def test_kept_matches_are_a_subset_of_brute_force(outcomes, utility) -> None:
    subs, posts, taught, tested = outcomes
    truth = _brute_force(subs, posts)
    n_ids = subs.n_posts  # placement ids are rows here
    found = {(int(k // n_ids), int(k % n_ids)) for k in np.unique(tested.match_key)}
    assert found == truth  # uncapped: exact
    a = tested.aligned
    stats = YieldStats(decay=0.0)
    stats.update(taught.observation, a.part_matchers.shape[0])
    weight = {
        "consensus": None,
        "subscription": tested.slot_subscriptions,
        "yield": stats.weights(tested.slot_subscriptions),
    }[utility]
    u = tested.utilities(weight)
    for m in (1, 2.5, 4):
        keep = cap_spread(tested.routed_indptr, tested.routed_matchers, u, m, seed=9)
        kept = {
            (int(k // n_ids), int(k % n_ids))
            for k in np.unique(tested.match_key[keep[tested.match_pair]])
        }
        assert kept <= truth
        assert tested.accuracy(keep) == pytest.approx(len(kept) / len(truth))
        pairs, work = tested.shed(keep)
        assert 0 < pairs < 1 and 0 < work < 1


def test_learned_yield_beats_counting_words(outcomes) -> None:
    # a data property of this seeded corpus, kept as a guard: the yield estimate must carry
    # information (a broken credit or prior makes it no better than consensus)
    _, _, taught, tested = outcomes
    stats = YieldStats(decay=0.0)
    stats.update(taught.observation, tested.aligned.part_matchers.shape[0])
    accuracy = {}
    for name, weight in (
        ("consensus", None),
        ("yield", stats.weights(tested.slot_subscriptions)),
    ):
        u = tested.utilities(weight)
        keep = cap_spread(tested.routed_indptr, tested.routed_matchers, u, 2, seed=9)
        accuracy[name] = tested.accuracy(keep)
    assert accuracy["yield"] > accuracy["consensus"]


def test_trie_counts_operations_per_post(outcomes) -> None:
    _, _, _, tested = outcomes
    # a routed post brings its matcher at least one word, so at least one trie lookup
    assert tested.pair_work.shape == tested.routed_matchers.shape
    assert (tested.pair_work >= 1).all()
    assert tested.pair_matches.sum() == tested.match_pair.shape[0]


# -- the yield estimate ------------------------------------------------------------------------
def test_observe_credits_each_match_once_to_its_first_word_on_the_matcher() -> None:
    # words 0 (slot 0 on m1), 1 (slots 1,2 on m0,m1), 2 (slot 3 on m0)
    part_start = np.array([0, 1, 3], dtype=np.int64)
    part_count = np.array([1, 2, 1], dtype=np.int32)
    part_matchers = np.array([1, 0, 1, 0], dtype=np.int32)
    subs_indptr = np.array([0, 2, 3], dtype=np.int64)
    subs_words = np.array([0, 1, 2], dtype=np.int32)  # {0,1}, {2}
    on_m0 = attribution_slots(subs_indptr, subs_words, 0, part_start, part_count, part_matchers)
    on_m1 = attribution_slots(subs_indptr, subs_words, 1, part_start, part_count, part_matchers)
    assert on_m0.tolist() == [1, 3] and on_m1.tolist() == [0, -1]
    posts_indptr = np.array([0, 3, 4], dtype=np.int64)
    posts_words = np.array([0, 1, 2, 1], dtype=np.int32)
    match_indptr = np.array([0, 2, 2], dtype=np.int64)
    obs = observe(
        posts_indptr, posts_words, np.array([True, True]), match_indptr,
        on_m0[[0, 1]], 0, part_start, part_count, part_matchers,
    )  # fmt: skip
    got = dict(zip(obs.slots.tolist(), zip(obs.matches, obs.posts, strict=True), strict=True))
    assert got == {1: (1.0, 2.0), 3: (1.0, 1.0)}
    none = observe(
        posts_indptr, posts_words, np.array([False, False]), match_indptr,
        on_m0[[0, 1]], 0, part_start, part_count, part_matchers,
    )  # fmt: skip
    assert none.slots.size == 0
    stats = YieldStats(decay=0.5, prior_posts=1.0)
    stats.update(YieldObservation.merge([obs, obs]), 4)
    stats.update(YieldObservation.empty(), 5)
    assert stats.matches[1] == pytest.approx(1.0) and stats.posts[1] == pytest.approx(2.0)
    w = stats.weights(np.array([1.0, 1.0, 0.0, 1.0, 0.0]))
    assert w[2] == 0.0 and w[4] == 0.0  # no subscriptions, never seen: no yield
    # by hand: 2 matches over 3 posts x subscriptions is the prior per subscription (2/3),
    # weighed as one post: slot 1 (1 match in 2 posts) (1 + 2/3) / 3, slot 3 (1 in 1)
    # (1 + 2/3) / 2, slot 0 (never seen) the prior alone
    assert w == pytest.approx([2 / 3, 5 / 9, 0.0, 5 / 6, 0.0])


# -- how much to shed ---------------------------------------------------------------------------
LOADS = np.array([1.0, 0.85, 0.75, 0.65, 0.55, 0.45, 0.3, 0.15])


def test_ideal_segment_from_the_loads() -> None:
    assert ideal_fraction(LOADS) == pytest.approx(0.15 / 0.3)
    with pytest.raises(InvalidArgumentError):
        ideal_fraction(np.array([1.0, 1.2]))


def test_controller_on_scripted_fullness() -> None:
    c = SheddingController(LOADS, 100.0, step="one")
    ideal = c.ideal_top
    assert c.adapt(120).level == 1  # overload: up
    assert c.adapt(130).level == 2  # still overload and not better: up again
    assert c.adapt(110).level == 2  # overload but improving: hold
    assert c.adapt(105).level == 2
    assert c.adapt(80).level == 2  # stable: hold
    assert c.adapt(ideal - 1).level == 1  # ideal: down
    assert c.adapt(ideal + 0.5 - 1).level == 1  # ideal but fuller than before: hold
    assert c.adapt(10).level == 0
    assert c.adapt(0).level == 0  # never below 0
    top = SheddingController(LOADS, 100.0, step="one")
    for _ in range(20):
        top.adapt(1000 + _)
    assert top.level == top.max_level


def _least_covering(loads: np.ndarray, capacity: float, rate: float, headroom: float) -> int:
    fits = np.flatnonzero(capacity / loads >= headroom * rate)
    return int(fits[0]) if fits.size else loads.shape[0] - 1


@pytest.mark.parametrize("rate", [0.5, 0.9, 1.3, 2.0, 4.0])
def test_constant_load_settles_on_the_least_level_that_keeps_up(rate) -> None:
    capacity = 1000.0
    c = SheddingController(LOADS, 2 * capacity, step="rate", capacity=capacity)
    run = simulate(c, [RateStep(0, rate * capacity)], 600, capacity=capacity, buffer_capacity=1e12)
    settled = _least_covering(LOADS, capacity, rate * capacity, c.headroom)
    # it rises (past the settled level while the backlog drains), then comes back and holds
    assert run.level_changes(0, 600) <= 3
    assert (run.level[300:] == settled).all()
    assert run.fullness[-1] == 0  # nothing carried
    if rate < 1:
        assert run.level.max() == 0
    elif settled < c.max_level:
        # shed no more than the input demands: the level below would not keep up
        assert capacity / LOADS[settled - 1] < c.headroom * rate * capacity


@pytest.mark.parametrize("rule", ["one", "rate"])
def test_a_carried_backlog_is_drained(rule) -> None:
    """The stream's failure at 2x (issue 37): a level high enough to hold the buffer in the
    stable segment, a backlog carried for the rest of the run. The rate rule drains it and
    then steps down to the least level that keeps up."""
    capacity = 1000.0
    c = SheddingController(LOADS, 2 * capacity, step=rule, capacity=capacity)
    c.level = 6  # L = 0.3: keeps up with 1.5x with room to spare
    steps = [RateStep(0, 1.5 * capacity)]
    carried = 0.9 * c.buffer_size / LOADS[6]  # posts whose work sits in the stable segment
    assert c.segment(carried * LOADS[6]) == "stable"
    run = simulate(c, steps, 300, capacity=capacity, buffer_capacity=1e12, initial_queue=carried)
    if rule == "rate":
        settled = _least_covering(LOADS, capacity, 1.5 * capacity, c.headroom)
        assert settled < 6
        assert (run.level[100:] == settled).all()
        assert run.fullness[-1] == 0
    else:  # the paper's rule steps down from the ideal segment one level at a time
        assert run.level[-1] <= 6


def test_paper_steps_rate_rule_meets_the_bars() -> None:
    capacity = 1000.0
    steps = [RateStep(0, 800), RateStep(500, 1600), RateStep(1000, 100), RateStep(1500, 800)]
    c = SheddingController(LOADS, 2 * capacity, step="rate", capacity=capacity)
    run = simulate(c, steps, 2000, capacity=capacity, buffer_capacity=2.5 * capacity)
    assert run.dropped.sum() == 0
    assert max(run.level_changes(a, a + 500) for a in (0, 500, 1000, 1500)) <= 2
    # settled at 1,600 posts/s: the least level whose capacity covers it with the headroom
    covering = int(np.flatnonzero(capacity / LOADS >= c.headroom * 1600)[0])
    assert run.level[900] == covering and run.level[1400] == 0 and run.level[-1] == 0


# -- which posts a drop level drops -------------------------------------------------------------
def test_dropping_the_least_valuable_posts_keeps_more_matches_than_random(outcomes) -> None:
    """The value estimate (learned yields, hashed word prefixes of the raw text) against
    random drop at the same rate, on posts whose matches are known exactly."""
    subs, posts, taught, tested = outcomes
    a = tested.aligned
    stats = YieldStats(decay=0.0)
    stats.update(taught.observation, a.part_matchers.shape[0])
    values = word_values(stats.weights(tested.slot_subscriptions), a.part_start, a.part_count)
    table = ValueTable.from_words(posts.vocabulary.tolist(), values)
    lines = pa.array([" ".join(posts.post_words(p)) for p in range(posts.n_posts)])
    matches = np.bincount(
        np.unique(tested.match_key) // subs.n_posts, minlength=posts.n_posts
    ).astype(np.float64)
    for fraction in (0.25, 0.5, 0.75):
        by_value = keep_most_valuable(line_values(lines, table), fraction, None, seed=1)
        at_random = drop_posts_at_random(posts.n_posts, fraction, seed=1)
        oracle = keep_most_valuable(matches, fraction, None, seed=1)
        kept = [matches[k].sum() / matches.sum() for k in (at_random, by_value, oracle)]
        assert kept[0] < kept[1] <= kept[2], (fraction, kept)
