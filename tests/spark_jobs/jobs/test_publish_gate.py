"""The publish gate judges by the stream's cost model first, then counted matcher work, then
the posts-only model: a candidate that wins on counted work but loses on the stream's
model is kept out, as is one whose posts-only model improves while its counted work gets
worse (delta-rs only)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from core.stream.costs import StreamCosts, posts_per_second
from spark_jobs.jobs.publish import publish
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.routing_store import add_version, published_version


def _version(number: int, status: str, evaluation: dict | None = None):
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return {
        "routing_version": number, "algorithm": "salb", "n_matchers": 4, "params": "{}",
        "inputs": "{}", "subscribed_words": None,
        "metrics": json.dumps({"evaluation": evaluation}) if evaluation else None,
        "validation": None, "status": status, "created_at": now,
        "published_at": now if status == "published" else None, "retired_at": None,
    }  # fmt: skip


def test_a_version_that_wins_on_counted_work_but_loses_on_the_stream_is_kept_out(
    tmp_path,
) -> None:
    """The candidate balances its matchers (its busiest does 20% less work) by sending
    each post to twice as many of them; where a routed copy costs more than the work it
    balances, the stream's model says the stream gets slower, and the gate keeps it out."""
    costs = StreamCosts(
        per_post=1e-6, per_copy_route=0.5e-6, per_copy_match=0.2e-6, per_work=0.02e-6,
        per_match=0.1e-6,
    )  # fmt: skip
    posts, matches = 100_000, 700_000
    # the published mapping: 4 matchers, spread 2 (200k copies), the busiest 1.5M work
    published = ([60_000, 50_000, 50_000, 40_000], [1_500_000, 1_200_000, 1_100_000, 1_000_000])
    # the candidate: spread 4 (400k copies), the busiest 1.2M work
    candidate = ([100_000] * 4, [1_200_000, 1_150_000, 1_150_000, 1_100_000])
    by_work = max(published[1]) / max(candidate[1])
    by_stream = posts_per_second(costs, posts, matches, *candidate) / posts_per_second(
        costs, posts, matches, *published
    )
    assert by_work > 1.2 and by_stream < 0.9  # the two measures disagree
    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    add_version(lakehouse, _version(1, "published"))
    evaluation = {
        "relative_work_throughput_vs_published": by_work,
        "relative_stream_throughput_vs_published": by_stream,
    }
    add_version(lakehouse, _version(2, "validated", evaluation))
    kept = publish(lakehouse, 2, margin=0.05)
    assert kept["changed"] is False and kept["basis"] == "stream model"
    assert kept["reason"].startswith("candidate throughput (stream model) x0.")
    assert published_version(lakehouse) == 1
    # cheap copies: the same candidate wins on the stream too, and is published
    cheap = StreamCosts(1e-6, 0.01e-6, 0.01e-6, 0.02e-6, 0.1e-6)
    evaluation["relative_stream_throughput_vs_published"] = posts_per_second(
        cheap, posts, matches, *candidate
    ) / posts_per_second(cheap, posts, matches, *published)
    assert evaluation["relative_stream_throughput_vs_published"] > 1.05
    add_version(lakehouse, _version(3, "validated", evaluation))
    assert publish(lakehouse, 3, margin=0.05)["changed"] is True


def test_a_better_model_with_worse_counted_work_is_not_published(tmp_path) -> None:
    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    add_version(lakehouse, _version(1, "published"))
    evaluation = {
        "relative_model_throughput_vs_published": 1.30,  # the model says: better
        "relative_work_throughput_vs_published": 0.90,  # the matchers' work says: worse
    }
    add_version(lakehouse, _version(2, "validated", evaluation))
    kept = publish(lakehouse, 2, margin=0.05)
    assert kept["changed"] is False and kept["basis"] == "counted work"
    assert published_version(lakehouse) == 1
    # better by counted work (and worse by the model): published
    evaluation = {
        "relative_model_throughput_vs_published": 0.95,
        "relative_work_throughput_vs_published": 1.10,
    }
    add_version(lakehouse, _version(3, "validated", evaluation))
    assert publish(lakehouse, 3, margin=0.05)["changed"] is True
    assert published_version(lakehouse) == 3


def test_without_counted_work_the_gate_goes_by_the_model_and_says_so(tmp_path) -> None:
    """No subscriptions to count matcher work with: the posts-only model decides, and the
    reason (the sentence the run report's decision gives) names it."""
    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    add_version(lakehouse, _version(1, "published"))
    add_version(
        lakehouse, _version(2, "validated", {"relative_model_throughput_vs_published": 1.01})
    )
    kept = publish(lakehouse, 2, margin=0.05)
    assert kept["changed"] is False and kept["basis"] == "model"
    assert kept["reason"] == (
        "candidate throughput (model) x1.010 of the published version is below the required x1.050"
    )
    add_version(
        lakehouse, _version(3, "validated", {"relative_model_throughput_vs_published": 1.06})
    )
    assert publish(lakehouse, 3, margin=0.05)["changed"] is True


def test_the_versions_table_says_what_a_missing_figure_lacks(tmp_path) -> None:
    """`routing list`: no ``nan`` where a version has no counted work; the words say why."""
    from spark_jobs.jobs.publish import render_versions

    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    add_version(lakehouse, _version(1, "published", {"relative_model_throughput_vs_hash": 1.23}))
    add_version(lakehouse, _version(2, "candidate"))
    add_version(
        lakehouse,
        _version(
            3,
            "validated",
            {
                "relative_model_throughput_vs_hash": 1.1,
                "relative_work_throughput_vs_hash": 1.456,
            },
        ),
    )
    for details in (False, True):
        text = render_versions(lakehouse, details=details)
        assert "nan" not in text.lower()
        lines = text.splitlines()
        assert "no subscriptions: the model's x1.23" in lines[2]
        assert "not evaluated" in lines[3]
        assert "1.456" in lines[4]


def test_hash_is_the_floor_of_a_first_version(tmp_path) -> None:
    """Nothing published: the candidate faces hash routing with the same margin and basis;
    one that loses is kept out, the verdict is recorded, `routing list` says why in one
    sentence, and the stream's routing in force is hash over the candidate's N."""
    from spark_jobs.jobs.publish import render_versions
    from spark_jobs.lake.routing_store import load_routing_table, routing_in_force

    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    evaluation = {
        "relative_model_throughput_vs_hash": 1.30,  # the model says: better
        "relative_work_throughput_vs_hash": 0.866,  # the matchers' work says: worse
    }
    add_version(lakehouse, _version(1, "validated", evaluation))
    assert routing_in_force(lakehouse) is None  # nothing judged yet: the stream waits
    kept = publish(lakehouse, 1, margin=0.02)
    assert kept == {
        "published": None,
        "changed": False,
        "candidate": 1,
        "basis": "counted work",
        "reason": "candidate throughput (counted work) x0.866 of hash routing is below the "
        "required x1.020; the stream routes by hash",
    }
    assert published_version(lakehouse) is None
    assert routing_in_force(lakehouse) == -4
    table = load_routing_table(lakehouse, -4)
    assert table.n_matchers == 4 and table.manifest["algorithm"] == "hash"
    assert table.subscribed_words is None  # every word routes, by its hash
    listed = render_versions(lakehouse).splitlines()
    assert listed[-1] == (
        "Version 1 was kept out by the publish gate: candidate throughput (counted work) "
        "x0.866 of hash routing is below the required x1.020; the stream routes by hash."
    )
    # the next candidate beats hash by the margin: published, its verdict-free row in force
    add_version(lakehouse, _version(2, "validated", {"relative_work_throughput_vs_hash": 1.25}))
    assert publish(lakehouse, 2, margin=0.02)["changed"] is True
    assert routing_in_force(lakehouse) == 2
    assert "kept out" not in render_versions(lakehouse)


def test_a_version_kept_out_then_published_by_hand_loses_its_verdict(tmp_path) -> None:
    """An operator's publish without a margin (`s3tm routing publish --version`) overrides
    the gate: the version is in force and no sentence says it was kept out."""
    from spark_jobs.jobs.publish import render_versions
    from spark_jobs.lake.routing_store import get_version, routing_in_force

    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    add_version(lakehouse, _version(1, "validated", {"relative_work_throughput_vs_hash": 0.9}))
    assert publish(lakehouse, 1, margin=0.0)["changed"] is False
    assert "publish_gate" in json.loads(get_version(lakehouse, 1)["metrics"] or "{}")
    assert publish(lakehouse, 1)["changed"] is True
    assert "publish_gate" not in json.loads(get_version(lakehouse, 1)["metrics"] or "{}")
    assert routing_in_force(lakehouse) == 1
    assert "kept out" not in render_versions(lakehouse)


def test_a_first_version_not_evaluated_against_hash_is_refused(tmp_path) -> None:
    import pytest

    from core.errors import InputDataError

    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    add_version(lakehouse, _version(1, "validated"))
    with pytest.raises(InputDataError, match="not evaluated against hash routing"):
        publish(lakehouse, 1, margin=0.02)


def test_a_version_of_an_earlier_window_is_recorded_not_published_over_a_newer_one(
    tmp_path,
) -> None:
    """A backfill's candidate wins by every measure, but was learned on days before the
    published version's: the gate keeps the newer version; an operator may still publish
    it by number; a window that ends on the same day or later is judged as usual."""
    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    better = {"relative_stream_throughput_vs_published": 2.0}

    def learned_until(number: int, status: str, end: str | None) -> Any:
        return {**_version(number, status, better), "inputs": json.dumps({"end": end})}

    add_version(lakehouse, learned_until(1, "published", "2026-03-06"))
    add_version(lakehouse, learned_until(2, "validated", "2026-03-03"))
    kept = publish(lakehouse, 2, margin=0.05)
    assert kept == {
        "published": 1,
        "changed": False,
        "candidate": 2,
        "reason": "candidate was learned on days up to 2026-03-03, before the published "
        "version's (2026-03-06): a past interval's version never replaces a newer one",
    }
    assert published_version(lakehouse) == 1
    add_version(lakehouse, learned_until(3, "validated", "2026-03-06"))
    add_version(lakehouse, learned_until(4, "validated", None))  # before windows were recorded
    assert publish(lakehouse, 4, margin=0.05)["changed"] is True
    assert publish(lakehouse, 3, margin=0.05)["changed"] is True
    assert publish(lakehouse, 2)["changed"] is True  # by hand, no margin
