"""Plain-text tables for the command line."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned first column, right-aligned others; floats to 3 decimals."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:,.3f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    table = [[cell(v) for v in header]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = []
    for n, row in enumerate(table):
        parts = [row[0].ljust(widths[0])] + [
            v.rjust(w) for v, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
