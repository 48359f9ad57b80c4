"""subscribe: the commands over the ``subscriptions.registry`` table (the table itself:
``spark_jobs.lake.subscription_store``).

``add`` / ``cancel`` / ``load`` change the small registry on the driver (one Delta commit
each; a cancelled subscription keeps its row with ``cancelled_at``). ``generate-topics``
fits Spark ML's LDA on ``silver.posts`` and registers topic-based subscriptions
(paper 001, Sect. 6.1: 100 topics, 5 words each, length ~ Zipf(0.5) in 1..5).
Words are normalised by ``core.text.normalize`` and stored sorted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar

import numpy as np
import tyro

from core.errors import InputDataError, InvalidArgumentError
from spark_jobs.common import exit_process, job_main
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


# deliveries go to a subscription's subscriber (``--owner`` is the older name)
Subscriber = Annotated[str, tyro.conf.arg(aliases=("--owner",))]


@dataclass(frozen=True)
class _ForSubscriber:
    subscriber: Subscriber
    """who the subscriptions belong to (deliveries go to them)"""


@dataclass(frozen=True)
class SubscribeAdd(_ForSubscriber):
    """register subscriptions: comma-separated phrases, each one subscription"""

    phrase: tyro.conf.Positional[str]
    """e.g. "white house, obama" (two subscriptions, ORed)"""


@dataclass(frozen=True)
class SubscribeCancel:
    """cancel subscriptions by id"""

    sub_ids: tyro.conf.Positional[tuple[int, ...]]
    """subscription ids to cancel"""

    def __post_init__(self) -> None:
        if not self.sub_ids:
            raise InvalidArgumentError("subscribe cancel: name the subscription ids to cancel")


@dataclass(frozen=True)
class SubscribeLoad(_ForSubscriber):
    """register one subscription per line of a file"""

    file: tyro.conf.Positional[str]
    """text file: one subscription per line (# comments skipped)"""


@dataclass(frozen=True)
class SubscribeTopics:
    """topic-based subscriptions from silver (LDA over silver.posts, then ``count`` word
    sets sampled from the topics and spread over ``subscribers``)"""

    count: int = 1000
    """subscriptions to register"""
    topics: int = 100
    """LDA topics"""
    words_per_topic: int = 5
    """words kept a topic"""
    max_iter: int = 10
    """LDA iterations"""
    subscribers: int = 100
    """spread the subscriptions over this many subscribers"""
    seed: int = 0
    """LDA and sampling seed"""


@dataclass(frozen=True)
class SubscribeList:
    """print the active subscriptions"""

    # read from the driver-side tables through delta-rs: no JVM, an answer in a second
    needs_spark: ClassVar[bool] = False


# ``s3tm subscribe add|cancel|load|generate-topics|list ...``
SubscriptionsCommand = (
    Annotated[SubscribeAdd, tyro.conf.subcommand("add")]
    | Annotated[SubscribeCancel, tyro.conf.subcommand("cancel")]
    | Annotated[SubscribeLoad, tyro.conf.subcommand("load")]
    | Annotated[SubscribeTopics, tyro.conf.subcommand("generate-topics")]
    | Annotated[SubscribeList, tyro.conf.subcommand("list")]
)


def run(
    command: SubscribeAdd | SubscribeCancel | SubscribeLoad | SubscribeTopics | SubscribeList,
    lakehouse: Lakehouse,
) -> int:
    if isinstance(command, SubscribeAdd):
        phrases = track_phrases(command.phrase)
        print(json.dumps({"added": add_subscriptions(lakehouse, phrases, command.subscriber)}))
    elif isinstance(command, SubscribeCancel):
        print(json.dumps({"cancelled": cancel_subscriptions(lakehouse, command.sub_ids)}))
    elif isinstance(command, SubscribeLoad):
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
    elif isinstance(command, SubscribeTopics):
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
    return job_main("subscriptions", __doc__ or "", SubscriptionsCommand, run, argv)


if __name__ == "__main__":
    exit_process(main())
