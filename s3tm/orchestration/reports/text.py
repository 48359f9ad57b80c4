"""The run report's sentences and tables, from the publish step's outcome and the latest
candidate's evaluation: what a person reads on the "Run report" tab (rendered from
Markdown by ``charts.report_html``), no JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def decision_sentence(outcome: Mapping[str, Any]) -> str:
    """The publish step's outcome as a sentence: what is published now, and why."""
    published = outcome.get("published")
    reason = str(outcome.get("reason") or "").rstrip(".")
    if outcome.get("changed"):
        retired = outcome.get("retired")
        if retired is None:
            return f"Published version {published}: the first published version."
        return f"Published version {published}, retiring version {retired}."
    if published is None:
        return f"Nothing published: {reason}." if reason else "Nothing published."
    candidate = outcome.get("candidate")
    kept = f"Kept version {published}"
    if candidate is not None:
        kept += f" (candidate version {candidate} not published)"
    return f"{kept}: the {reason}." if reason else f"{kept}."


def _number(value: Any, digits: int) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:,.{digits}f}"
    return "-"


def evaluation_table(evaluation: Mapping[str, Any]) -> list[str]:
    """The candidate, the published version and hash routing on the same held-out posts,
    as a Markdown table, and the ratios the publish gate reads."""
    columns = [
        (
            "model throughput (posts / busiest load)",
            lambda r: _number(r["model"].get("throughput"), 1),
        ),
        ("spread", lambda r: _number(r["model"].get("spread_routed"), 2)),
        ("imbalance", lambda r: _number(r["model"].get("imbalance"), 2)),
        (
            "posts per 1,000 of the busiest matcher's work",
            lambda r: (
                _number(1000 * r["work_throughput"], 1)
                if isinstance(r.get("work_throughput"), int | float)
                else "-"
            ),
        ),
        ("matches", lambda r: _number(r.get("matches"), 0)),
    ]
    rows: list[tuple[str, Mapping[str, Any]]] = []
    for key, label in (
        ("candidate", "candidate"),
        ("published", "published"),
        ("hash", "hash routing"),
    ):
        row = evaluation.get(key)
        if isinstance(row, Mapping) and isinstance(row.get("model"), Mapping):
            if key == "published" and row.get("routing_version") is not None:
                label = f"published (version {row['routing_version']})"
            rows.append((label, row))
    if not rows:
        return ["No evaluation of the latest candidate."]
    lines = [
        f"On {_number(evaluation.get('posts'), 0)} held-out posts:",
        "",
        "| | " + " | ".join(name for name, _ in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    lines += [
        "| " + label + " | " + " | ".join(f(row) for _, f in columns) + " |" for label, row in rows
    ]
    ratios = []
    for key, text in (
        ("relative_stream_throughput_vs_hash", "by the stream's model against hash routing"),
        ("relative_work_throughput_vs_hash", "by matcher work against hash routing"),
        ("relative_model_throughput_vs_hash", "by the posts-only model against hash routing"),
        (
            "relative_stream_throughput_vs_published",
            "by the stream's model against the published version",
        ),
        ("relative_work_throughput_vs_published", "by matcher work against the published version"),
        ("relative_model_throughput_vs_published", "by the model against the published version"),
    ):
        value = evaluation.get(key)
        if isinstance(value, int | float):
            ratios.append(f"- the candidate is x{value:.3f} {text}")
    return [*lines, "", *ratios] if ratios else lines
