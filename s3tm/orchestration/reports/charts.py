"""The remap run report's pictures as inline SVG (no plotting library on the Airflow
workers): each matcher's counted work under the published version and the candidate, and
the throughput of every version by matcher work against hash routing."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schemas.rows import VersionRow

WIDTH, HEIGHT, PAD = 640, 220, 36
COLOURS = {"published": "#4c78a8", "candidate": "#f58518"}


def _frame(title: str, body: list[str], y_label: str) -> str:
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'role="img" aria-label="{html.escape(title)}">',
            f'<text x="{PAD}" y="16" font-size="13" font-family="sans-serif">'
            f"{html.escape(title)}</text>",
            f'<text x="4" y="{HEIGHT // 2}" font-size="10" font-family="sans-serif" '
            f'transform="rotate(-90 10,{HEIGHT // 2})">{html.escape(y_label)}</text>',
            f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - 8}" y2="{HEIGHT - PAD}" '
            'stroke="#888"/>',
            *body,
            "</svg>",
        ]
    )


def work_per_matcher(series: dict[str, Sequence[float]]) -> str:
    """Grouped bars: per matcher, each series' counted work (lookups + matches)."""
    series = {name: list(values) for name, values in series.items() if values}
    if not series:
        return ""
    n = max(len(v) for v in series.values())
    top = max(max(v) for v in series.values()) or 1.0
    slot = (WIDTH - PAD - 8) / n
    bar = max(1.0, slot / (len(series) + 1))
    body = []
    for s_i, (name, values) in enumerate(series.items()):
        colour = COLOURS.get(name, "#54a24b")
        for m, value in enumerate(values):
            h = (HEIGHT - 2 * PAD) * value / top
            x = PAD + m * slot + s_i * bar
            body.append(
                f'<rect x="{x:.1f}" y="{HEIGHT - PAD - h:.1f}" width="{bar:.1f}" '
                f'height="{h:.1f}" fill="{colour}"><title>{html.escape(name)} matcher {m}: '
                f"{value:,.0f}</title></rect>"
            )
        body.append(
            f'<text x="{WIDTH - 150}" y="{30 + 14 * s_i}" font-size="11" fill="{colour}" '
            f'font-family="sans-serif">{html.escape(name)}: max/mean '
            f"{max(values) / (sum(values) / len(values)):.2f}</text>"
        )
    body.append(
        f'<text x="{PAD}" y="{HEIGHT - 12}" font-size="10" font-family="sans-serif">'
        f"matcher 0 .. {n - 1}</text>"
    )
    return _frame("Counted work per matcher on the held-out posts", body, "lookups + matches")


def throughput_by_version(rows: Sequence[VersionRow]) -> str:
    """One bar per version: throughput by matcher work, x hash routing (the gate's measure),
    coloured by status."""
    points = []
    for row in rows:
        evaluation = json.loads(row["metrics"] or "{}").get("evaluation", {})
        value = evaluation.get("relative_work_throughput_vs_hash")
        if value is not None:
            points.append((int(row["routing_version"]), float(value), str(row["status"])))
    if not points:
        return ""
    top = max(v for _, v, _ in points) or 1.0
    slot = (WIDTH - PAD - 8) / len(points)
    status_colour = {"published": "#4c78a8", "retired": "#9ecae9", "rejected": "#e45756"}
    body = []
    for i, (version, value, status) in enumerate(points):
        h = (HEIGHT - 2 * PAD) * value / top
        x = PAD + i * slot + slot * 0.15
        body.append(
            f'<rect x="{x:.1f}" y="{HEIGHT - PAD - h:.1f}" width="{slot * 0.7:.1f}" '
            f'height="{h:.1f}" fill="{status_colour.get(status, "#f58518")}"><title>version '
            f"{version} ({status}): x{value:.2f}</title></rect>"
        )
        body.append(
            f'<text x="{x:.1f}" y="{HEIGHT - PAD + 12}" font-size="10" '
            f'font-family="sans-serif">v{version}</text>'
        )
        body.append(
            f'<text x="{x:.1f}" y="{HEIGHT - PAD - h - 3:.1f}" font-size="10" '
            f'font-family="sans-serif">x{value:.2f}</text>'
        )
    return _frame("Throughput by matcher work, x hash routing, per version", body, "x hash")


_STYLE = (
    "body { font-family: sans-serif; max-width: 960px; margin: 1em auto; }"
    " table { border-collapse: collapse; margin: 0.5em 0; }"
    " th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; }"
    " td { text-align: right; } td:first-child { text-align: left; }"
    " pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; }"
)


def markdown_html(markdown_lines: Sequence[str]) -> str:
    """Markdown (CommonMark with tables) as HTML; raw HTML in the text is escaped."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    return str(renderer.render("\n".join(markdown_lines)))


def report_html(title: str, markdown_lines: Sequence[str], charts: Sequence[str]) -> str:
    """The report as one HTML page: its text rendered (headings, lists, tables), the
    pictures after its first paragraph (the headline)."""
    body = markdown_html(markdown_lines)
    first_paragraph_end = body.find("</p>")
    pictures = "\n".join(c for c in charts if c)
    if first_paragraph_end >= 0:
        cut = first_paragraph_end + len("</p>")
        body = body[:cut] + "\n" + pictures + body[cut:]
    else:
        body = pictures + body
    return "\n".join(
        [
            "<!doctype html>",
            f"<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
            f"<style>{_STYLE}</style></head><body>",
            body,
            "</body></html>",
        ]
    )
