"""Run reports under the lakehouse: ``<lakehouse>/reports/<kind>-<run id>.md``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def report_name(kind: str, run_id: str, suffix: str = ".md") -> str:
    """``<kind>-<run id><suffix>``, characters unsafe in file names as ``_``."""
    safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    return f"{kind}-{safe_id}{suffix}"


def read_report(root: str | Path, kind: str, run_id: str, suffix: str = ".md") -> str | None:
    """A run's report text, None when the run wrote none."""
    from spark_jobs.lake import storage

    name = report_name(kind, run_id, suffix)
    if storage.is_remote(str(root)):
        location = storage.join(storage.normalise_root(str(root)), "reports", name)
        store, key = storage.filesystem(location)
        try:
            with store.open_input_stream(key) as stream:
                return bytes(stream.read()).decode()
        except FileNotFoundError:
            return None
    path = Path(root) / "reports" / name
    return path.read_text() if path.is_file() else None


def write_report(
    root: str | Path, kind: str, run_id: str, lines: Sequence[str], *, suffix: str = ".md"
) -> Path | str:
    """Write a report (Markdown, or the ``suffix`` given) named by the run (characters
    unsafe in file names become ``_``) under ``<lakehouse>/reports``; returns its path (its
    URI on object storage, where a Kubernetes task pod's own disk would vanish with the
    pod)."""
    from spark_jobs.lake import storage

    name = report_name(kind, run_id, suffix)
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


def list_reports(root: str | Path, kind: str, suffix: str = ".md") -> list[str]:
    """The reports of ``kind`` under ``<lakehouse>/reports``, sorted by name: local paths,
    or URIs on object storage."""
    from spark_jobs.lake import storage

    if storage.is_remote(str(root)):
        import pyarrow.fs as pafs

        location = storage.join(storage.normalise_root(str(root)), "reports")
        store, key = storage.filesystem(location)
        infos = store.get_file_info(pafs.FileSelector(key, allow_not_found=True))
        names = sorted(
            i.base_name
            for i in infos
            if i.base_name.startswith(f"{kind}-") and i.base_name.endswith(suffix)
        )
        return [storage.join(location, name) for name in names]
    return [str(p) for p in sorted((Path(root) / "reports").glob(f"{kind}-*{suffix}"))]
