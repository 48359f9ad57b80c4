"""The remap DAG's run report: which remap the learn step chose, and on which posts."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from s3tm.orchestration.reports.text import decision_sentence
from s3tm.orchestration.tasks.remap import remap_lines, stale_request_reason

INCREMENTAL = {
    "remap": "incremental",
    "remap_reason": "a full remap gains 3.0% <= 10.0% on the held-out posts",
    "from_version": 4,
    "moved_tokens": 12,
    "moved_subscription_words": 30,
    "move_budget": 100,
    "incremental_training_throughput": 1.2,
    "full_training_throughput": 1.9,
}


def test_the_report_says_on_which_posts_the_remap_was_judged() -> None:
    params = {
        **INCREMENTAL,
        "remap_judged_on": "held-out posts",
        "judged_posts": 2000,
        "incremental_judged_throughput": 1.5,
        "full_judged_throughput": 1.545,
    }
    latest: Any = {"routing_version": 5, "params": json.dumps(params)}
    lines = remap_lines(latest, {})
    assert lines[0] == f"- version 5: incremental remap ({params['remap_reason']})"
    assert "12 tokens moved" in lines[1]
    assert lines[2] == ("- judged on 2000 held-out posts: throughput 1.5 incremental vs 1.545 full")


def test_versions_learned_before_the_held_out_judge_still_report() -> None:
    latest: Any = {"routing_version": 5, "params": json.dumps(INCREMENTAL)}
    lines = remap_lines(latest, {})
    assert len(lines) == 2 and not any("judged on" in line for line in lines)
    assert remap_lines(None, {}) == ["- no routing version yet"]


def _requests(*checked: object) -> dict[str, list[SimpleNamespace]]:
    """``triggering_asset_events`` of a run the monitor asked for, once per check; a check
    given as ``...`` made an event without the version it checked (an older monitor)."""
    extras = [
        {"conditions": ["no_version: posts are ingested but none is published"]}
        | ({} if version is ... else {"routing_version": version})
        for version in checked
    ]
    return {"remap_request": [SimpleNamespace(extra=extra) for extra in extras]}


def test_a_request_made_before_another_version_was_published_is_stale() -> None:
    reason = stale_request_reason(_requests(None), 1)
    assert reason is not None
    assert decision_sentence({"published": 1, "reason": reason}) == (
        "Kept version 1: the monitor's request is stale: it checked no version, and version 1 "
        "is in force now; its next check asks again if the condition still holds."
    )
    assert "it checked no version and version 2, and version 3 is in force" in str(
        stale_request_reason(_requests(2, None), 3)
    )
    # the gate kept the remap's candidate out since: the stream routes by hash (-N)
    assert "it checked no version, and hash routing (N=16) is in force now" in str(
        stale_request_reason(_requests(None), -16)
    )


def test_a_request_on_the_live_version_or_no_request_holds() -> None:
    assert stale_request_reason(_requests(2), 2) is None
    assert stale_request_reason(_requests(None), None) is None  # still nothing published
    assert stale_request_reason(_requests(1, 2), 2) is None  # one of the merged requests holds
    assert stale_request_reason(_requests(...), 5) is None  # which version it saw is unknown
    assert stale_request_reason(None, 2) is None  # the nightly run or a Trigger
    assert stale_request_reason({}, 2) is None


def test_the_report_says_in_one_sentence_when_hash_stays_the_floor(tmp_path) -> None:
    """A first candidate that loses to hash: the run report's decision is one sentence that
    says so, with the figure, the bar and what the stream does meanwhile."""
    import datetime as dt

    from spark_jobs.jobs.publish import publish
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.routing_store import add_version

    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    add_version(lakehouse, {
        "routing_version": 1, "algorithm": "salb2", "n_matchers": 16, "params": "{}",
        "inputs": "{}", "subscribed_words": None,
        "metrics": json.dumps({"evaluation": {"relative_work_throughput_vs_hash": 0.866}}),
        "validation": None, "status": "validated", "created_at": now, "published_at": None,
        "retired_at": None,
    })  # fmt: skip
    outcome = publish(lakehouse, None, margin=0.02)
    assert decision_sentence(dict(outcome)) == (
        "Nothing published: candidate throughput (counted work) x0.866 of hash routing is "
        "below the required x1.020; the stream routes by hash."
    )
