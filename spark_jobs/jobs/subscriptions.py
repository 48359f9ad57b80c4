"""subscribe: the commands over the ``subscriptions.registry`` table (the table itself:
``spark_jobs.lake.subscription_store``).

``add`` / ``cancel`` / ``load`` change the small registry on the driver (one Delta commit
each; a cancelled subscription keeps its row with ``cancelled_at``). ``generate-topics``
fits Spark ML's LDA on ``silver.posts`` and registers topic-based subscriptions
(paper 001, Sect. 6.1: 100 topics, 5 words each, length ~ Zipf(0.5) in 1..5).
Words are normalised by ``core.text.normalize`` and stored sorted.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import InputDataError
from core.subscriptions.workloads import sample_topic_word_sets
from spark_jobs.common import add_common_arguments, job_main, log
from spark_jobs.lake.subscription_store import (
    active_subscriptions,
    add_subscriptions,
    cancel_subscriptions,
    register_word_sets,
    track_phrases,
)


def lda_topics(
    silver: Any,
    *,
    n_topics: int,
    words_per_topic: int,
    max_iter: int,
    seed: int,
    vocab_size: int = 20_000,
) -> list[list[str]]:
    """Top words of Spark ML LDA topics over the posts' word lists."""
    from pyspark.ml.clustering import LDA
    from pyspark.ml.feature import CountVectorizer

    vectorizer = CountVectorizer(
        inputCol="words", outputCol="features", binary=True, vocabSize=vocab_size, minDF=3.0
    ).fit(silver)
    vectors = vectorizer.transform(silver).select("features").cache()
    model = LDA(
        k=n_topics,
        maxIter=max_iter,
        seed=seed,
        optimizer="online",
        docConcentration=[0.1],
        topicConcentration=0.1,
    ).fit(vectors)
    vocabulary = vectorizer.vocabulary
    return [
        [vocabulary[i] for i in row.termIndices]
        for row in model.describeTopics(words_per_topic).orderBy("topic").collect()
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False)
    add_common_arguments(common, nested=True)
    p = sub.add_parser(
        "add",
        parents=[common],
        help="register subscriptions: comma-separated phrases, each one subscription",
    )
    p.add_argument("phrase", help='e.g. "white house, obama" (two subscriptions, ORed)')
    p.add_argument("--subscriber", "--owner", dest="subscriber", required=True)
    p = sub.add_parser("cancel", parents=[common], help="cancel subscriptions by id")
    p.add_argument("sub_ids", type=int, nargs="+")
    p = sub.add_parser(
        "load", parents=[common], help="register one subscription per line of a file"
    )
    p.add_argument("file")
    p.add_argument("--subscriber", "--owner", dest="subscriber", required=True)
    p = sub.add_parser(
        "generate-topics", parents=[common], help="topic-based subscriptions from silver (LDA)"
    )
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--words-per-topic", type=int, default=5)
    p.add_argument("--max-iter", type=int, default=10)
    p.add_argument(
        "--subscribers",
        type=int,
        default=100,
        help="spread the subscriptions over this many subscribers",
    )
    p.add_argument("--seed", type=int, default=0)
    sub.add_parser("list", parents=[common], help="print the active subscriptions")


def run(args: argparse.Namespace, lakehouse: Any) -> int:
    if args.action == "add":
        phrases = track_phrases(args.phrase)
        print(json.dumps({"added": add_subscriptions(lakehouse, phrases, args.subscriber)}))
    elif args.action == "cancel":
        print(json.dumps({"cancelled": cancel_subscriptions(lakehouse, args.sub_ids)}))
    elif args.action == "load":
        path = Path(args.file)
        if not path.is_file():
            raise InputDataError(f"subscription file not found: {path}")
        phrases = [
            line.strip()
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("# ")
        ]
        loaded = add_subscriptions(lakehouse, phrases, args.subscriber)
        print(json.dumps({"added": len(loaded), "first": loaded[0] if loaded else None}))
    elif args.action == "generate-topics":
        topics = lda_topics(
            lakehouse.read("silver.posts"),
            n_topics=args.topics,
            words_per_topic=args.words_per_topic,
            max_iter=args.max_iter,
            seed=args.seed,
        )
        width = min(len(t) for t in topics)
        sets = sample_topic_word_sets(
            np.array([t[:width] for t in topics], dtype=object), args.count, args.seed
        )
        word_sets = [sorted(s.tolist()) for s in sets]
        rng = np.random.default_rng(args.seed)
        owners = rng.integers(args.subscribers, size=len(word_sets))
        ids = register_word_sets(
            lakehouse,
            [" ".join(w) for w in word_sets],
            word_sets,
            [f"subscriber-{owner:04d}" for owner in owners],
        )
        log.info("registered %d topic-based subscriptions from %d topics", len(ids), len(topics))
        print(json.dumps({"added": len(ids), "topics": topics[:3]}))
    else:
        for row in active_subscriptions(lakehouse):
            print(f"{row['sub_id']}\t{row['subscriber']}\t{' '.join(row['words'])}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return job_main("subscriptions", __doc__ or "", add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
