"""The run report's pictures (inline SVG): a bar per matcher and series, a bar per
evaluated version, nothing drawn without figures."""

from __future__ import annotations

import json
import re

from s3tm.orchestration.report_charts import report_html, throughput_by_version, work_per_matcher


def test_work_per_matcher_draws_a_bar_per_matcher_and_series() -> None:
    svg = work_per_matcher({"published": [10, 30, 20], "candidate": [20, 20, 20]})
    assert svg.startswith("<svg") and svg.count("<rect") == 6
    assert "published: max/mean 1.50" in svg and "candidate: max/mean 1.00" in svg
    heights = [float(h) for h in re.findall(r'height="([0-9.]+)"', svg)[1:]]
    assert max(heights) == heights[1]  # the busiest matcher's bar is the tallest
    assert work_per_matcher({}) == ""


def test_throughput_by_version_draws_the_evaluated_versions() -> None:
    def row(version: int, status: str, work: float | None) -> dict:
        evaluation = {} if work is None else {"relative_work_throughput_vs_hash": work}
        metrics = json.dumps({"evaluation": evaluation})
        return {"routing_version": version, "status": status, "metrics": metrics}

    rows = [row(1, "retired", 1.4), row(2, "published", 2.1), row(3, "rejected", None)]
    svg = throughput_by_version(rows)  # type: ignore[arg-type]
    assert svg.count("<rect") == 2 and "x2.10" in svg and "v3" not in svg
    assert throughput_by_version([]) == ""
    page = report_html("run <1>", ["# text & more"], [svg, ""])
    assert "<svg" in page and "run &lt;1&gt;" in page and "# text &amp; more" in page
