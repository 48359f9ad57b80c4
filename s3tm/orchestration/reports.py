"""Run reports under the lakehouse: ``<lakehouse>/reports/<kind>-<run id>.md``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def write_report(root: str | Path, kind: str, run_id: str, lines: Sequence[str]) -> Path:
    """Write a Markdown report named by the run (characters unsafe in file names become
    ``_``); returns its path."""
    safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    path = Path(root) / "reports" / f"{kind}-{safe_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path
