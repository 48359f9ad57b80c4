"""graph: ``silver.posts`` of a day range -> ``gold.post_words`` (bipartite edges),
``gold.word_stats`` (f(w), f_n(w)) and ``gold.cooccurrence`` (word pairs, optional).

Each run overwrites exactly the days it computes (Delta partition overwrite), so re-running
a day range gives the same tables.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from core.errors import InvalidArgumentError
from spark_jobs.common import exit_process, job_entry, window_start
from spark_jobs.jobs.configs import GraphConfig as GraphConfig

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from spark_jobs.lake.delta_io import Lakehouse


def post_words(silver: DataFrame) -> DataFrame:
    """Bipartite edges (day, post_id, word)."""
    from pyspark.sql import functions as F

    return silver.select(
        F.col("event_day").alias("day"), "post_id", F.explode("words").alias("word")
    )


def word_stats(silver: DataFrame) -> DataFrame:
    """Per (day, word): posts containing it, and f_n = sum over those posts of |P| - 1
    (the word's co-occurrence frequencies summed, paper Sect. 3.2)."""
    from pyspark.sql import functions as F

    edges = silver.select(
        F.col("event_day").alias("day"), "n_words", F.explode("words").alias("word")
    )
    return edges.groupBy("day", "word").agg(
        F.count(F.lit(1)).alias("post_frequency"),
        F.sum(F.col("n_words") - 1).cast("long").alias("cofrequency_sum"),
    )


def cooccurrence(silver: DataFrame) -> DataFrame:
    """Per (day, word_a < word_b): posts containing both."""
    from pyspark.sql import functions as F

    # a post's pairs are made inside its row (words are sorted, so a word with those after
    # it gives word_a < word_b): no self-join of the exploded edges by post id, which
    # shuffled 2 x 80M rows at 10M posts
    pairs = F.expr(
        "flatten(transform(sequence(1, n - 1), i -> transform(slice(words, i + 1, n - i), "
        "w -> named_struct('word_a', words[i - 1], 'word_b', w))))"
    )
    return (
        silver.select(F.col("event_day").alias("day"), "words", F.size("words").alias("n"))
        .where(F.col("n") >= 2)  # sequence(1, 0) would count down
        .select("day", F.explode(pairs).alias("pair"))
        .groupBy("day", F.col("pair.word_a").alias("word_a"), F.col("pair.word_b").alias("word_b"))
        .agg(F.count(F.lit(1)).alias("count"))
    )


def run(config: GraphConfig, lakehouse: Lakehouse) -> int:
    from pyspark.sql import functions as F

    silver = lakehouse.read("silver.posts")
    start = config.start or window_start(silver, "event_day", config.window_days, config.end)
    if start:
        silver = silver.where(F.col("event_day") >= F.lit(start))
    if config.end:
        silver = silver.where(F.col("event_day") <= F.lit(config.end))
    silver = silver.cache()
    days = sorted(r.event_day for r in silver.select("event_day").distinct().collect())
    if not days:
        raise InvalidArgumentError("no silver posts in the requested day range")
    outputs = [("gold.post_words", post_words), ("gold.word_stats", word_stats)]
    if config.cooccurrence:
        outputs.append(("gold.cooccurrence", cooccurrence))
    summary: dict[str, object] = {"days": [d.isoformat() for d in days]}
    for name, transform in outputs:
        result = lakehouse.write(
            transform(silver), name, mode="overwrite", replace_where={"day": days}
        )
        summary[name] = {"rows": result.rows, "version": result.version}
        log.info("%s: %s rows for %d days", name, result.rows, len(days))
    print(json.dumps(summary))
    return 0


main = job_entry("graph", __doc__, GraphConfig, run)


if __name__ == "__main__":
    exit_process(main())
