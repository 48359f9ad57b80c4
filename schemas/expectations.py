"""Expectation suites (Great Expectations 1.x), kept with the table schemas they check.

Generic expectations come from the schema (non-nullable columns, unique keys); each suite
adds the table's semantic rules (docs/ARCHITECTURE.md):

- ``silver.posts``: ids unique and non-null, word arrays non-empty;
- ``routing.mappings`` (one version): matcher ids in [0, N); every subscribed word mapped;
  split words have all their versions (``part`` < number of parts of the word);
- ``routing.placements`` (one version): every active subscription placed; every placement
  eligible (the matcher owns one of the subscription's words).

Derived columns the rules need (``n_parts``, ``eligible``) are computed by the caller
(``spark_jobs.lake.validation``) before validation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schemas.tables import TableSpec, table


def _generic(spec: TableSpec) -> list[Any]:
    import great_expectations.expectations as gxe

    rules: list[Any] = [gxe.ExpectColumnToExist(column=c) for c in spec.columns]
    rules += [
        gxe.ExpectColumnValuesToNotBeNull(column=f.name)
        for f in spec.schema
        if not f.nullable and f.name not in spec.partition_by
    ]
    return rules


def silver_posts_suite() -> list[Any]:
    import great_expectations.expectations as gxe

    return [
        *_generic(table("silver.posts")),
        gxe.ExpectColumnValuesToBeUnique(column="post_id"),
        gxe.ExpectColumnValuesToBeBetween(column="n_words", min_value=1),
    ]


def mappings_suite(n_matchers: int, subscribed_words: Sequence[str] | None) -> list[Any]:
    import great_expectations.expectations as gxe

    rules = [
        *_generic(table("routing.mappings")),
        gxe.ExpectColumnValuesToBeBetween(
            column="matcher_id", min_value=0, max_value=n_matchers - 1
        ),
        gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A="n_parts", column_B="part"),
        gxe.ExpectCompoundColumnsToBeUnique(column_list=["word", "part"]),
    ]
    if subscribed_words:
        rules.append(
            gxe.ExpectColumnDistinctValuesToContainSet(
                column="word", value_set=sorted(subscribed_words)
            )
        )
    return rules


def placements_suite() -> list[Any]:
    import great_expectations.expectations as gxe

    return [
        *_generic(table("routing.placements")),
        gxe.ExpectColumnValuesToBeInSet(column="eligible", value_set=[True]),
    ]


def subscriptions_placed_suite() -> list[Any]:
    """Every active subscription has a placement in the version: one row per active
    subscription with ``placed`` (not a value set of every id in the suite: millions)."""
    import great_expectations.expectations as gxe

    return [
        gxe.ExpectColumnValuesToNotBeNull(column="sub_id"),
        gxe.ExpectColumnValuesToBeUnique(column="sub_id"),
        gxe.ExpectColumnValuesToBeInSet(column="placed", value_set=[True]),
    ]
