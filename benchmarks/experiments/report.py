"""Writing experiment tables: CSV, a printed table and a multi-panel plot."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.experiments.options import WindowOptions
from core.errors import S3TMError
from core.formatting import format_table


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend. matplotlib is the ``bench`` extra
    (the platform itself draws nothing): a clear error says how to get it."""
    try:
        import matplotlib
    except ImportError as err:
        raise S3TMError(
            "figures need matplotlib, the `bench` extra: pip install 's3tm[bench]' "
            "(`make setup` installs it)"
        ) from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f"{v:.4f}" if isinstance(v, float) else v for k, v in row.items()})


def print_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    print(format_table(list(columns), [[row[c] for c in columns] for row in rows]))


def plot_panels(
    rows: Sequence[dict[str, Any]],
    *,
    x: str,
    panels: Sequence[str],
    group_by: str,
    split_by: str,
    path: Path,
    title: str,
    log_x: bool = True,
    log_y: Sequence[str] = (),
) -> None:
    """One row of panels per value of ``split_by``, one line per ``group_by`` value."""
    plt = pyplot()

    splits = list(dict.fromkeys(str(r[split_by]) for r in rows))
    groups = list(dict.fromkeys(str(r[group_by]) for r in rows))
    fig, axes = plt.subplots(
        len(splits), len(panels), figsize=(4.2 * len(panels), 3.4 * len(splits)), squeeze=False
    )
    for r_i, split in enumerate(splits):
        for c_i, panel in enumerate(panels):
            ax = axes[r_i][c_i]
            for group in groups:
                pts = [
                    (row[x], row[panel])
                    for row in rows
                    if str(row[split_by]) == split and str(row[group_by]) == group
                ]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", markersize=3, label=group)
            if log_x:
                ax.set_xscale("log", base=2 if x == "N" else 10)
            if panel in log_y:
                ax.set_yscale("log")
            ax.set_xlabel(x)
            ax.set_title(f"{panel} ({split})", fontsize=9)
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_figure(
    rows: Sequence[dict[str, Any]],
    out: Path,
    name: str,
    progress: Callable[[str], None],
    **plot: Any,
) -> None:
    """``out/name.csv`` and its panels ``out/name.png`` (:func:`plot_panels`' options), and
    a line saying so."""
    write_csv(rows, out / f"{name}.csv")
    plot_panels(rows, path=out / f"{name}.png", **plot)
    progress(f"wrote {out / f'{name}.csv'} and {out / f'{name}.png'}")


@dataclass(frozen=True)
class WindowFigure:
    """What an experiment over time windows prints and plots: its table's columns, its CSV
    and PNG's name, a panel per figure, one line per ``group_by``."""

    name: str
    columns: Sequence[str]
    panels: Sequence[str]
    group_by: str


def finish_windows(
    rows: list[dict[str, Any]],
    figure: WindowFigure,
    summarize: Callable[[list[dict[str, Any]], Callable[[str], None]], None],
    options: WindowOptions,
    progress: Callable[[str], None],
    title: str,
) -> list[dict[str, Any]]:
    """The end of an experiment over time windows: its table (unless the rows went out as
    JSON lines), its summary, then ``out/<name>.csv`` and its panels."""
    if not options.json:
        print_rows(rows, figure.columns)
    summarize(rows, progress)
    write_figure(
        rows,
        Path(options.out),
        figure.name,
        progress,
        x="window",
        panels=list(figure.panels),
        group_by=figure.group_by,
        split_by="workload",
        title=title,
        log_x=False,
    )
    return rows
