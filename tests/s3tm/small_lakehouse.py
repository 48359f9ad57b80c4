"""Small lakehouses the CLI and SQL tests build with delta-rs alone (no JVM)."""

from __future__ import annotations

import json

from core.corpus.arrays import corpus_from_word_lists
from core.learn import learn_mapping
from schemas.rows import VersionRow
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.routing_store import add_version, now_utc, write_mapping


def publish_version(lake: Lakehouse, version: int, n: int) -> None:
    """A salb routing version learned on a few word lists, published, through delta-rs
    alone (no JVM)."""
    posts = [["white", "hous"], ["elect", "night"], ["hous", "vote"], ["vote"]] * 10
    write_mapping(lake, version, learn_mapping(corpus_from_word_lists(posts), n, "salb").table)
    add_version(
        lake,
        VersionRow(
            routing_version=version,
            algorithm="salb",
            n_matchers=n,
            params=json.dumps({"label": "salb"}),
            inputs="{}",
            subscribed_words=None,
            metrics=None,
            validation=None,
            status="published",
            created_at=now_utc(),
            published_at=now_utc(),
            retired_at=None,
        ),
    )
