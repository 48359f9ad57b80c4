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
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from core.errors import InputDataError
from spark_jobs.common import action_job_main, add_common_arguments, exit_process
from spark_jobs.lake.subscription_store import (
    active_subscriptions,
    add_subscriptions,
    cancel_subscriptions,
    register_word_sets,
    track_phrases,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from spark_jobs.lake.delta_io import Lakehouse


def lda_topics(
    silver: DataFrame,
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


# actions that only read driver-side tables: run without a JVM (s3tm.cli.jobs)
READ_ONLY_ACTIONS = frozenset({"list"})


@dataclass(frozen=True)
class SubscriptionsCommand:
    """action: add | cancel | load | generate-topics | list, with that action's options
    (``generate-topics``: LDA over silver.posts, then ``count`` word sets sampled from the
    topics and spread over ``subscribers``)."""

    action: Literal["add", "cancel", "load", "generate-topics", "list"]
    phrase: str = ""
    subscriber: str = ""
    sub_ids: Sequence[int] = ()
    file: str = ""
    count: int = 1000
    topics: int = 100
    words_per_topic: int = 5
    max_iter: int = 10
    subscribers: int = 100
    seed: int = 0


def _add_subscriber(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--subscriber",
        "--owner",
        dest="subscriber",
        required=True,
        help="who the subscriptions belong to (deliveries go to them)",
    )


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
    _add_subscriber(p)
    p = sub.add_parser("cancel", parents=[common], help="cancel subscriptions by id")
    p.add_argument("sub_ids", type=int, nargs="+", help="subscription ids to cancel")
    p = sub.add_parser(
        "load", parents=[common], help="register one subscription per line of a file"
    )
    p.add_argument("file", help="text file: one subscription per line (# comments skipped)")
    _add_subscriber(p)
    p = sub.add_parser(
        "generate-topics", parents=[common], help="topic-based subscriptions from silver (LDA)"
    )
    defaults = SubscriptionsCommand
    p.add_argument("--count", type=int, default=defaults.count, help="subscriptions to register")
    p.add_argument("--topics", type=int, default=defaults.topics, help="LDA topics")
    p.add_argument(
        "--words-per-topic", type=int, default=defaults.words_per_topic, help="words kept a topic"
    )
    p.add_argument("--max-iter", type=int, default=defaults.max_iter, help="LDA iterations")
    p.add_argument(
        "--subscribers",
        type=int,
        default=defaults.subscribers,
        help="spread the subscriptions over this many subscribers",
    )
    p.add_argument("--seed", type=int, default=defaults.seed, help="LDA and sampling seed")
    sub.add_parser("list", parents=[common], help="print the active subscriptions")


def run(command: SubscriptionsCommand, lakehouse: Lakehouse) -> int:
    if command.action == "add":
        phrases = track_phrases(command.phrase)
        print(json.dumps({"added": add_subscriptions(lakehouse, phrases, command.subscriber)}))
    elif command.action == "cancel":
        print(json.dumps({"cancelled": cancel_subscriptions(lakehouse, command.sub_ids)}))
    elif command.action == "load":
        path = Path(command.file)
        if not path.is_file():
            raise InputDataError(f"subscription file not found: {path}")
        phrases = [
            line.strip()
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("# ")
        ]
        loaded = add_subscriptions(lakehouse, phrases, command.subscriber)
        print(json.dumps({"added": len(loaded), "first": loaded[0] if loaded else None}))
    elif command.action == "generate-topics":
        # the workload generator (numba kernels) only for this action: `list` stays light
        from core.subscriptions.workloads import sample_topic_word_sets

        topics = lda_topics(
            lakehouse.read("silver.posts"),
            n_topics=command.topics,
            words_per_topic=command.words_per_topic,
            max_iter=command.max_iter,
            seed=command.seed,
        )
        width = min(len(t) for t in topics)
        sets = sample_topic_word_sets(
            np.array([t[:width] for t in topics], dtype=object), command.count, command.seed
        )
        word_sets = [sorted(s.tolist()) for s in sets]
        rng = np.random.default_rng(command.seed)
        owners = rng.integers(command.subscribers, size=len(word_sets))
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
    return action_job_main(
        "subscriptions", __doc__ or "", add_arguments, SubscriptionsCommand, run, argv
    )


if __name__ == "__main__":
    exit_process(main())
