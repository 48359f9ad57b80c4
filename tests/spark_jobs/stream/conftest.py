"""The streaming tests' shared scene: a landing directory and registered subscriptions."""

from __future__ import annotations

import pytest

from spark_jobs.lake.subscription_store import register_word_sets
from tests.spark_jobs.stream.harness import Landing, subscription_sets


@pytest.fixture
def scene(lakehouse, tmp_path):
    landing = Landing(tmp_path / "landing")
    sets = subscription_sets(landing, 300, seed=2)
    # several subscribers, several subscriptions each (Twitter's track: phrases ORed)
    for owner in range(5):
        register_word_sets(
            lakehouse, [" ".join(s) for s in sets[owner::5]], sets[owner::5], f"user{owner}"
        )
    return landing
