"""Compile every numba kernel once, ahead of the first job that needs it.

The kernels are compiled on first use and cached beside their modules (``cache=True``).
On a fresh install every process that meets a kernel before its cache exists compiles it
itself: the first stream batch of a new pod, the first learn task, and each Python worker
of a Spark job at once (a minute and more of CPU on 2 cores). ``make setup`` and the image
build run this module, so that later processes only load the cache.

The kernels are reached through the public functions that call them, on a few hundred
generated posts, with the argument types the jobs pass (Arrow-backed read-only arrays
where the jobs pass those). ``tests/core/test_warm_kernels.py`` checks that no kernel is
left out. Run: ``python -m core.warm_kernels``.
"""

from __future__ import annotations

import datetime as dt
import sys
import time

import numpy as np
import pyarrow as pa

from core.corpus.arrays import Corpus, corpus_from_arrow_lists, take_rows
from core.corpus.json_lines import judge_lines
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus, pseudo_word
from core.learn import learn_mapping
from core.matching.counting import CountingMatcher
from core.matching.predicate import AccessPredicateMatcher
from core.matching.trie import TrieMatcher
from core.monitor.sketch import SketchSpec, WordSketch
from core.placement.lasp import place_subscriptions
from core.placement.live import LivePlacement
from core.remap_options import HOLDOUT_FRACTION, HOLDOUT_SEED
from core.replay import replay
from core.routing.evaluate import evaluate_table
from core.sampling.hash_fraction import hash_fraction_mask, spark_xxhash64
from core.shedding.drop import drop_lines
from core.shedding.plan import ShedPlan
from core.shedding.post_value import ValueTable
from core.shedding.shedder import drop_posts_at_random
from core.stream.dispatch import MATCHED_ARROW, Subscribers, dispatch_tables
from core.stream.matcher_yield import matcher_yield
from core.stream.snapshot import snapshot_of
from core.stream.word_health import WordKeys
from core.stream.worker import MatcherCache, gather_for_matchers, route_and_shed
from core.text.encoder import normalize_arrow

N_MATCHERS = 4


def _received(values: pa.Array) -> pa.Array:
    """``values`` as a task receives them (Arrow IPC from the JVM or a shuffle): their
    buffers are read-only, a type of its own to numba."""
    batch = pa.record_batch([values], names=["values"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return pa.ipc.open_stream(sink.getvalue()).read_next_batch().column(0)


def _texts(corpus: Corpus) -> list[str]:
    """The corpus' posts as texts (its words are normalised already: they stay as they are)."""
    words = corpus.vocabulary.tolist()
    return [
        " ".join(words[w] for w in corpus.indices[corpus.indptr[p] : corpus.indptr[p + 1]])
        for p in range(corpus.n_posts)
    ]


def _learn_and_place(posts: Corpus, subs: Corpus) -> None:
    """The remap's kernels: learners (with and without hot-word splits, salb2 weighing the
    subscriptions' matches), routing, LASP and the replay's trie."""
    for algorithm, split in (("hash", False), ("salb", False), ("salb", True), ("salb2", True)):
        learned = learn_mapping(
            posts, N_MATCHERS, algorithm, split=split, subscriptions=subs, seed=1
        )
        evaluate_table(learned.table, posts, seed=1)
    # a hot word split in versions whatever its share (the monitor's live hot words)
    hot = str(posts.vocabulary[int(np.argmax(np.bincount(posts.indices)))])
    learn_mapping(posts, N_MATCHERS, "salb", split=True, min_parts={hot: 3}, seed=1)
    placement = place_subscriptions(learned.table, subs)
    replay(learned.table, placement, subs, posts, repeats=1, min_sample_seconds=0.0)
    # salb2 on posts alone (no subscriptions: no match weights), the learn job's other path
    learn_mapping(posts, N_MATCHERS, "salb2", split=True, seed=2)


def _matchers(subs: Corpus, posts: Corpus) -> None:
    ids = np.arange(subs.n_posts, dtype=np.int64)
    predicate = AccessPredicateMatcher(ids, subs.indptr, subs.indices)
    predicate.set_cancelled(ids[:3])
    predicate.match(posts.indptr, posts.indices)
    CountingMatcher(ids, subs.indptr, subs.indices).match(posts.indptr, posts.indices)
    trie = TrieMatcher(capacity=16)  # grows: its table is rehashed
    trie.insert_many(ids, subs.indptr, subs.indices)
    trie.delete(int(ids[0]))
    trie.match(posts.indptr, posts.indices)
    trie.count_matches(posts.indptr, posts.indices, subs.n_posts)
    trie.compact()


def _stream(texts: list[str], sub_words: list[list[str]], table_posts: Corpus) -> None:
    """A micro-batch's kernels as the stream's tasks call them: the raw lines judged (the
    JSON fast path), dropped by value, encoded, routed and capped, each matcher's words
    gathered and matched, the health sketch, and dispatch."""
    routing = learn_mapping(table_posts, N_MATCHERS, "salb", split=True, seed=3).table
    live = LivePlacement(routing)
    live.place(list(range(len(sub_words))), sub_words)
    # the stream's first load of a version adopts the stored placements; cancels leave it
    word_lists = pa.array(sub_words, pa.list_(pa.string()))
    stored = place_subscriptions(routing, corpus_from_arrow_lists(word_lists))
    adopted = LivePlacement(routing)
    ids = np.arange(len(sub_words), dtype=np.int64)
    adopted.adopt_arrays(ids, word_lists, stored.indptr, stored.matchers)
    adopted.remove(ids[:5])
    snapshot = snapshot_of(live, 1, 1, seed=3)
    lines = pa.array(
        [f'{{"id": "warm-{i}", "text": "{t}"}}'.encode() for i, t in enumerate(texts)],
        pa.binary(),
    )
    values = ValueTable.from_words(snapshot.words, np.ones(len(snapshot.words)))
    drop_lines(ShedPlan(drop_fraction=0.5), lines, seed=1)  # at random
    drop_posts_at_random(len(lines), 0.5, 1)  # the experiments' baseline
    drop = drop_lines(ShedPlan(drop_fraction=0.5, drop_values=values), lines, seed=1)
    lines = lines.filter(pa.array(drop.keep))
    judge_lines(lines)
    judged = judge_lines(_received(lines))
    post_ids = judged.post_id.filter(judged.accepted)
    hash_fraction_mask(post_ids, HOLDOUT_FRACTION, HOLDOUT_SEED)
    spark_xxhash64(0, post_ids)
    cache = MatcherCache("predicate")
    texts_in = judged.text.filter(judged.accepted)
    cache.encoder(snapshot).encode(texts_in)
    indptr, word_ids = cache.encoder(snapshot).encode(_received(texts_in))
    capped = ShedPlan(utility="yield", level=1, max_spread=1.0, exempt_fraction=0.1,
                      slot_weight=np.ones(snapshot.part_matchers.shape[0]))  # fmt: skip
    for plan in (ShedPlan(), capped):
        shed = route_and_shed(snapshot, plan, indptr, word_ids, seed=5)
    WordKeys().health(snapshot, indptr, word_ids, shed.routed)
    sketch = WordSketch(SketchSpec())
    WordKeys().count_words(snapshot, np.bincount(word_ids, minlength=snapshot.n_words), sketch)
    sketch.heavy_hitters(0.01)
    # a worker's token table grows past its first size: rehashed
    cache.encoder(snapshot).encode(pa.array([f"token{i} x{i}" for i in range(6000)]))
    # the match task cuts the words out of the shuffled payload: read-only Arrow buffers
    payload_words = word_ids.copy()
    payload_words.flags.writeable = False
    gather_for_matchers(
        indptr, payload_words, shed.pair_post, shed.pair_matcher, cache.matcher_words(snapshot)
    )
    rows: list[dict[str, object]] = []
    for m in range(snapshot.n_matchers):
        pairs = np.flatnonzero(shed.pair_matcher == m)
        offsets, words = gather_for_matchers(
            indptr, word_ids, shed.pair_post[pairs], shed.pair_matcher[pairs],
            cache.matcher_words(snapshot),
        )  # fmt: skip
        matches = cache.match(snapshot, m, offsets, words)
        sampled = np.ones(pairs.shape[0], dtype=np.bool_)
        matcher_yield(cache.held(snapshot, m), snapshot, m, offsets, words, sampled, matches)
        take_rows(indptr, word_ids, shed.pair_post[pairs])  # the uncut payload (trie index)
        for r in range(pairs.shape[0]):
            found = matches.sub_ids[matches.indptr[r] : matches.indptr[r + 1]].tolist()
            if found:
                post = str(post_ids[int(shed.pair_post[pairs[r]])])
                rows.append({"post_id": post, "matcher_id": m, "shedding_level": 0,
                             "sub_ids": found})  # fmt: skip
    matched = pa.Table.from_pylist(rows, schema=MATCHED_ARROW)
    subscribers = Subscribers.of({s: f"user{s % 3}" for s in range(len(sub_words))})
    dispatch_tables(matched, subscribers, 1, 0, dt.datetime.now(dt.UTC))


def warm_kernels() -> float:
    """Compiles (or loads from the cache) every kernel; returns the seconds it took."""
    started = time.perf_counter()
    spec = SyntheticCorpusSpec(n_posts=600, n_words=300, seed=11)
    generated = generate_corpus(spec)
    texts = _texts(generated)
    # the jobs build their corpora from Arrow word lists (Spark's toArrow, the normaliser)
    posts = corpus_from_arrow_lists(normalize_arrow(pa.array(texts, pa.string())))
    sub_words = [sorted({pseudo_word(r) for r in (k % 40, 3 * k % 90)}) for k in range(120)]
    subs = corpus_from_arrow_lists(pa.array(sub_words, pa.list_(pa.string())))
    _learn_and_place(posts, subs)
    _matchers(subs, posts)
    _stream(texts, sub_words, posts)
    return time.perf_counter() - started


def main() -> int:
    print(f"numba kernels compiled and cached in {warm_kernels():.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
