"""The run report's pictures (inline SVG): a bar per matcher and series, a bar per
evaluated version, nothing drawn without figures."""

from __future__ import annotations

import json
import re
from typing import Any

from s3tm.orchestration.reports.charts import report_html, throughput_by_version, work_per_matcher


def test_work_per_matcher_draws_a_bar_per_matcher_and_series() -> None:
    svg = work_per_matcher({"published": [10, 30, 20], "candidate": [20, 20, 20]})
    assert svg.startswith("<svg") and svg.count("<rect") == 6
    assert "published: max/mean 1.50" in svg and "candidate: max/mean 1.00" in svg
    heights = [float(h) for h in re.findall(r'height="([0-9.]+)"', svg)[1:]]
    assert max(heights) == heights[1]  # the busiest matcher's bar is the tallest
    assert work_per_matcher({}) == ""


def test_throughput_by_version_draws_the_evaluated_versions() -> None:
    def row(version: int, status: str, work: float | None) -> Any:
        evaluation = {} if work is None else {"relative_work_throughput_vs_hash": work}
        metrics = json.dumps({"evaluation": evaluation})
        return {"routing_version": version, "status": status, "metrics": metrics}

    rows = [row(1, "retired", 1.4), row(2, "published", 2.1), row(3, "rejected", None)]
    svg = throughput_by_version(rows)
    assert svg.count("<rect") == 2 and "x2.10" in svg and "v3" not in svg
    assert throughput_by_version([]) == ""
    page = report_html(
        "run <1>", ["# text & more", "", "first", "", "| a |", "|---|", "| 1 |"], [svg, ""]
    )
    assert "<svg" in page and "run &lt;1&gt;" in page and "<h1>text &amp; more</h1>" in page
    # rendered, the pictures after the first paragraph; raw HTML in the text stays text
    assert page.index("<p>first</p>") < page.index("<svg") < page.index("<table>")
    assert "<td>1</td>" in page and "|---|" not in page
    assert "&lt;b&gt;" in report_html("t", ["a <b>bold</b> claim"], [])


def test_the_decision_is_a_sentence_and_the_evaluation_a_table() -> None:
    from s3tm.orchestration.reports.text import decision_sentence, evaluation_table

    kept = {
        "published": 1,
        "changed": False,
        "candidate": 2,
        "basis": "counted work",
        "reason": "candidate throughput (counted work) x1.000 of the published version is "
        "below the required x1.020",
    }
    assert decision_sentence(kept) == (
        "Kept version 1 (candidate version 2 not published): the candidate throughput "
        "(counted work) x1.000 of the published version is below the required x1.020."
    )
    assert decision_sentence({"published": 3, "changed": True, "retired": 2}) == (
        "Published version 3, retiring version 2."
    )
    assert decision_sentence({"published": 1, "changed": True, "retired": None}).endswith(
        "the first published version."
    )
    assert decision_sentence({"published": None, "reason": "skipped: no posts"}) == (
        "Nothing published: skipped: no posts."
    )
    model = {"throughput": 1234.5, "spread_routed": 1.5, "imbalance": 1.1}
    evaluation = {
        "posts": 2000,
        "candidate": {"model": model, "work_throughput": 0.0021, "matches": 900},
        "published": {"routing_version": 1, "model": model},
        "hash": {"model": model, "work_throughput": 0.001},
        "relative_work_throughput_vs_hash": 2.1,
    }
    lines = evaluation_table(evaluation)
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + 3 and "| published (version 1) |" in table[3]
    assert "2.1" in table[2] and "1,234.5" in table[2]  # 1000 x 0.0021 posts per 1,000 ops
    assert "- the candidate is x2.100 by matcher work against hash routing" in lines
    assert evaluation_table({}) == ["No evaluation of the latest candidate."]


def test_the_report_opens_with_the_published_version_by_matcher_work() -> None:
    from s3tm.orchestration.tasks.remap import headline

    def row(version: int, status: str, evaluation: dict) -> Any:
        metrics = json.dumps({"evaluation": evaluation})
        return {"routing_version": version, "status": status, "metrics": metrics}

    both = {"relative_work_throughput_vs_hash": 4.31, "relative_model_throughput_vs_hash": 1.1}
    rows = [row(1, "retired", both), row(2, "published", both), row(3, "rejected", {})]
    assert headline(rows) == "Published: version 2, x4.31 of hash routing, by matcher work."
    model_only = [row(1, "published", {"relative_model_throughput_vs_hash": 1.8})]
    assert "x1.80 of hash routing by the posts-only model" in headline(model_only)
    assert headline([row(1, "rejected", {})]) == "No version is published."
