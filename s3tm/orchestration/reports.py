"""Run reports under the lakehouse: ``<lakehouse>/reports/<kind>-<run id>.md``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def write_report(root: str | Path, kind: str, run_id: str, lines: Sequence[str]) -> Path | str:
    """Write a Markdown report named by the run (characters unsafe in file names become
    ``_``) under ``<lakehouse>/reports``; returns its path (its URI on object storage,
    where a Kubernetes task pod's own disk would vanish with the pod)."""
    from spark_jobs.lake import storage

    safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    name = f"{kind}-{safe_id}.md"
    if storage.is_remote(str(root)):
        location = storage.join(storage.normalise_root(str(root)), "reports", name)
        store, key = storage.filesystem(location)
        with store.open_output_stream(key) as out:
            out.write("\n".join(lines).encode())
        return location
    path = Path(root) / "reports" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path
