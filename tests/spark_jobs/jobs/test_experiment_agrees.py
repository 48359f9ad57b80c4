"""The experiment (``s3tm experiment``: learn, LASP, replay in core) and the platform (the
learn, place and evaluate jobs on the lakehouse) judge a mapping against hash routing the
same way: on the same posts, the same held-out split and the same subscriptions they give
the same learned mapping and the same throughput by counted work against hash."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from benchmarks.experiments.paper import _against_hash
from benchmarks.experiments.runner import Workloads, subscribed_words
from core.corpus.arrays import corpus_from_arrow_lists
from core.corpus.edges import training_corpus
from core.corpus.synthetic import SyntheticCorpusSpec
from core.learn import learn_mapping
from core.placement.cost import CostFit
from core.placement.lasp import UNIT_COST
from core.sampling.hash_fraction import hash_fraction_mask
from core.subscriptions.workloads import tweet_subscriptions
from spark_jobs.jobs import evaluate, graph, ingest, learn, normalise, place
from spark_jobs.jobs.sampling import HOLDOUT_SEED
from spark_jobs.lake.corpus_files import write_demo_corpus
from spark_jobs.lake.routing_store import get_version, load_routing_table
from spark_jobs.lake.subscription_store import active_corpus, register_word_sets

NODES = 4


def test_the_experiment_and_the_platform_agree_on_the_same_input(lakehouse, tmp_path):
    landing = tmp_path / "landing"
    spec = SyntheticCorpusSpec(n_posts=2000, n_words=1500, seed=6)
    write_demo_corpus(landing / "demo.jsonl.gz", spec, days=2)
    day = dt.date(2026, 2, 1)
    config = ingest.IngestConfig(landing=str(landing), batch_id=1, default_day=day)
    assert ingest.run(config, lakehouse) == 0
    assert normalise.run(normalise.NormaliseConfig(sample_rate=1.0, seed=0), lakehouse) == 0
    # the experiment's split of the posts is the platform's hold-out (xxhash of the post id),
    # its training corpus the learn job's (posts in id order, words ranked by frequency:
    # the learners follow the order they are given)
    silver = lakehouse.read_arrow("silver.posts", columns=["post_id", "words"])
    held = hash_fraction_mask(silver["post_id"].combine_chunks(), 0.2, HOLDOUT_SEED)
    held_out = corpus_from_arrow_lists(silver["words"].combine_chunks()).select(held)
    kept = silver.filter(pa.array(~held))
    lengths = pc.list_value_length(kept["words"])
    edges = pa.table(
        {
            "post_id": pc.take(kept["post_id"], pc.list_parent_indices(kept["words"])),
            "word": pc.list_flatten(kept["words"]),
        }
    )
    training = training_corpus(edges)
    assert training.n_posts == int(pc.sum(pc.greater(lengths, 0)).as_py())
    drawn = tweet_subscriptions(training, 400, seed=1)
    sets = [
        drawn.vocabulary[drawn.indices[drawn.indptr[s] : drawn.indptr[s + 1]]].tolist()
        for s in range(drawn.n_posts)
    ]
    register_word_sets(lakehouse, [" ".join(s) for s in sets], sets, "alice")
    subs = active_corpus(lakehouse)  # both sides place the registry's subscriptions
    # the platform: the nightly remap's jobs
    assert graph.run(graph.GraphConfig(cooccurrence=False), lakehouse) == 0
    remap = learn.LearnConfig(nodes=NODES, algorithm="salb2", holdout_fraction=0.2, seed=0)
    assert learn.run(remap, lakehouse) == 0
    # LASP's cost model fitted on a sample of the posts, as the nightly remap places
    assert place.run(place.PlaceConfig(seed=0), lakehouse) == 0
    platform = evaluate.evaluate_version(lakehouse, None, seed=0)
    version = platform["routing_version"]
    fitted = evaluate.placement_cost(json.loads(get_version(lakehouse, version)["metrics"]))
    assert fitted != UNIT_COST
    # the experiment: the same posts, split and subscriptions, LASP with the same cost model
    work = Workloads(training, held_out, seed=0, lda_iterations=1)
    cost = CostFit(fitted, np.zeros(0), np.zeros(0), 1.0)
    hash_row, salb2_row = _against_hash(
        training, work, subs, cost, NODES, ["hash", "salb2"], repeats=1
    )
    assert platform["posts"] == held_out.n_posts
    # the same mapping learned ...
    learned = learn_mapping(
        training, NODES, "salb2", subscribed_words=subscribed_words(subs), seed=0,
        subscriptions=subs,
    )  # fmt: skip
    rows = ["word", "part", "matcher_id"]
    assert (
        load_routing_table(lakehouse, version)
        .to_arrow()
        .sort_by([(c, "ascending") for c in rows[:2]])
        .select(rows)
        .equals(learned.table.to_arrow().sort_by([(c, "ascending") for c in rows[:2]]).select(rows))
    )
    # ... the same counted work of the busiest matcher, for the candidate and for hash ...
    assert platform["candidate"]["work_throughput"] == pytest.approx(
        salb2_row["replay_ops_per_post_max"], rel=1e-12
    )
    assert platform["hash"]["work_throughput"] == pytest.approx(
        hash_row["replay_ops_per_post_max"], rel=1e-12
    )
    # ... so the same ratio, the one the publish gate reads
    assert platform["relative_work_throughput_vs_hash"] == pytest.approx(
        salb2_row["replay_work_rel_throughput"], rel=1e-12
    )
