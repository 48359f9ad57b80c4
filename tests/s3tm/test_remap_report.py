"""The remap DAG's run report: which remap the learn step chose, and on which posts."""

from __future__ import annotations

import json

from s3tm.orchestration.remap_tasks import remap_lines

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
    latest = {"routing_version": 5, "params": json.dumps(params)}
    lines = remap_lines(latest, {})
    assert lines[0] == f"- version 5: incremental remap ({params['remap_reason']})"
    assert "12 tokens moved" in lines[1]
    assert lines[2] == ("- judged on 2000 held-out posts: throughput 1.5 incremental vs 1.545 full")


def test_versions_learned_before_the_held_out_judge_still_report() -> None:
    latest = {"routing_version": 5, "params": json.dumps(INCREMENTAL)}
    lines = remap_lines(latest, {})
    assert len(lines) == 2 and not any("judged on" in line for line in lines)
    assert remap_lines(None, {}) == ["- no routing version yet"]
