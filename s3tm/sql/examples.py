"""The questions the platform team asks, as SQL over the lakehouse (``s3tm sql --examples``,
``docs/QUERIES.md``). Each runs as it stands: "the published version" and "the one before"
are subqueries, not placeholders. Written in the SQL that DuckDB (``s3tm sql``) and Spark
SQL (``s3tm sql-server``) share."""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import InvalidArgumentError


@dataclass(frozen=True)
class Example:
    name: str
    question: str
    sql: str


PUBLISHED = "(SELECT max(routing_version) FROM routing.versions WHERE status = 'published')"
PREVIOUS = (
    "(SELECT max(routing_version) FROM routing.versions WHERE published_at IS NOT NULL"
    f" AND routing_version < {PUBLISHED})"
)

EXAMPLES: tuple[Example, ...] = (
    Example(
        "version-history",
        "Which version is published, and how do the last versions compare?",
        """
SELECT routing_version, algorithm, n_matchers, status,
       CAST(get_json_object(metrics, '$.evaluation.candidate.model.spread') AS DOUBLE) AS spread,
       CAST(get_json_object(metrics, '$.evaluation.candidate.model.imbalance') AS DOUBLE)
           AS imbalance,
       get_json_object(validation, '$.success') AS validated,
       created_at, published_at
FROM routing.versions
ORDER BY routing_version DESC
LIMIT 4
""",
    ),
    Example(
        "words-moved",
        "Which words changed matcher between the published version and the one before?",
        f"""
SELECT coalesce(new.word, old.word) AS word,
       old.matchers AS matchers_before, new.matchers AS matchers_now
FROM (SELECT word, array_sort(array_agg(matcher_id)) AS matchers
      FROM routing.mappings WHERE routing_version = {PREVIOUS} GROUP BY word) AS old
FULL OUTER JOIN
     (SELECT word, array_sort(array_agg(matcher_id)) AS matchers
      FROM routing.mappings WHERE routing_version = {PUBLISHED} GROUP BY word) AS new
  ON old.word = new.word
WHERE {PREVIOUS} IS NOT NULL  -- one published version only: nothing moved
  AND (old.matchers IS NULL OR new.matchers IS NULL OR old.matchers <> new.matchers)
ORDER BY word
""",
    ),
    Example(
        "subscriptions-moved",
        "How many subscriptions changed matchers between the published version and the one before?",
        f"""
SELECT count(*) AS subscriptions, sum(CASE WHN_PLACEHOLDER END) AS moved
FROM (SELECT sub_id, array_sort(array_agg(matcher_id)) AS matchers
      FROM routing.placements WHERE routing_version = {PREVIOUS} GROUP BY sub_id) AS old
JOIN (SELECT sub_id, array_sort(array_agg(matcher_id)) AS matchers
      FROM routing.placements WHERE routing_version = {PUBLISHED} GROUP BY sub_id) AS new
  USING (sub_id)
""".replace("WHN_PLACEHOLDER", "WHEN old.matchers <> new.matchers THEN 1 ELSE 0"),
    ),
    Example(
        "matcher-load",
        "How loaded was each matcher under the published version, per day?",
        f"""
SELECT CAST(matched_at AS DATE) AS day, matcher_id, count(*) AS matches,
       count(DISTINCT post_id) AS posts
FROM matches
WHERE routing_version = {PUBLISHED}
GROUP BY CAST(matched_at AS DATE), matcher_id
ORDER BY day, matcher_id
""",
    ),
    Example(
        "subscriber-deliveries",
        "What did subscriber alice receive in the hour up to the latest delivery?",
        """
SELECT d.delivered_at, d.post_id, d.sub_ids, d.routing_version
FROM deliveries AS d
WHERE d.subscriber = 'alice'
  AND d.delivered_at >= (SELECT max(delivered_at) FROM deliveries) - INTERVAL 1 HOUR
ORDER BY d.delivered_at DESC, d.post_id
""",
    ),
    Example(
        "quarantine-by-day",
        "Why were records rejected, per day and stage?",
        """
SELECT CAST(quarantined_at AS DATE) AS day, stage, reason, count(*) AS records
FROM silver.posts_quarantine
GROUP BY CAST(quarantined_at AS DATE), stage, reason
ORDER BY day, stage, records DESC, reason
""",
    ),
    Example(
        "stream-batches",
        "How did the streaming matcher's recent micro-batches go?",
        """
SELECT batch_id, routing_version, posts, routed_pairs, matches, deliveries, quarantined,
       round(CAST(routed_pairs AS DOUBLE) / nullif(posts, 0), 2) AS spread,
       seconds_total
FROM stream.batches
WHERE stage = 'committed'
ORDER BY recorded_at DESC
LIMIT 20
""",
    ),
)


def example(name: str) -> Example:
    """The example called ``name``.

    Raises:
        InvalidArgumentError: no such example (the message lists them).
    """
    for item in EXAMPLES:
        if item.name == name:
            return item
    raise InvalidArgumentError(
        f"no example {name!r}; examples: {', '.join(e.name for e in EXAMPLES)}"
    )
