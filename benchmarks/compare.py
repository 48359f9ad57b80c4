"""Side-by-side speed: the same benchmark in a git worktree of an earlier revision and in
this tree, alternating runs on the same machine, so that the machine's noise and its
1.5x spread between machines of one kind cancel out in the ratio.

Each run is a fresh process (``python -m s3tm.cli.main bench ...``) with the tree first on
``PYTHONPATH``, so the Spark Python workers it starts import the same tree too.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.options import ChangesBench, DropBench, MatcherBench, StreamBench
from core.errors import InputDataError

if TYPE_CHECKING:
    from benchmarks.stream import StreamInputs

TREE = Path(__file__).resolve().parents[1]


def _git(*argv: str, cwd: Path = TREE) -> str:
    done = subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise InputDataError(f"git {' '.join(argv)}: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout.strip()


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[tuple[Path, str]]:
    """A detached worktree of ``rev`` in a temporary folder: (path, full commit id)."""
    if not (TREE / ".git").exists():
        raise InputDataError(f"--compare needs a git checkout; {TREE} is not one")
    commit = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    folder = Path(tempfile.mkdtemp(prefix="s3tm-compare-")) / "tree"
    _git("worktree", "add", "--detach", str(folder), commit)
    try:
        yield folder, commit
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=TREE, check=False)
        shutil.rmtree(folder.parent, ignore_errors=True)


def run_bench(tree: Path, argv: Sequence[str]) -> None:
    """``s3tm <argv>`` with ``tree``'s code; its output goes to ours, prefixed."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-m", "s3tm.cli.main", *argv],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise InputDataError(
            f"benchmark in {tree} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        )


def run_json_child(tree: Path, argv: Sequence[str], what: str) -> dict[str, Any]:
    """``python <argv>`` with ``tree``'s code first on ``PYTHONPATH``; its last stdout line,
    parsed as JSON (the figures of one run)."""
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise InputDataError(f"{what} in {tree} failed: {done.stderr.strip()[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


@dataclass(frozen=True)
class Side:
    name: str
    tree: Path
    values: list[dict[str, float]]


def alternate(
    baseline: Path,
    runs: int,
    one_run: Callable[[Path, Path], dict[str, float]],
    scratch: Path,
) -> tuple[Side, Side]:
    """``runs`` x (baseline, new), alternating; ``one_run(tree, out_dir)`` -> figures."""
    old = Side("baseline", baseline, [])
    new = Side("new", TREE, [])
    for k in range(runs):
        for side in (old, new):
            out = scratch / f"{side.name}-{k}"
            figures = one_run(side.tree, out)
            side.values.append(figures)
            shown = ", ".join(f"{key} {value:,.1f}" for key, value in figures.items())
            print(f"  run {k + 1}/{runs} {side.name:8s} {shown}", flush=True)
    return old, new


def median(values: list[dict[str, float]], key: str) -> float:
    present = [v[key] for v in values if key in v]
    return float(statistics.median(present)) if present else float("nan")


def min_max(values: list[dict[str, float]], key: str, digits: int = 0) -> str:
    """The range of one figure over a side's runs, e.g. ``940041-1022163``."""
    present = [v[key] for v in values if key in v]
    return f"{min(present):.{digits}f}-{max(present):.{digits}f}" if present else ""


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def _write(rows: list[dict[str, object]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


def compare_stream(options: StreamBench, inputs: StreamInputs) -> list[dict[str, object]]:
    """``s3tm bench stream`` at ``options.compare`` and here, alternating;
    ``stream_compare.csv`` (rows of other workloads already in it are kept).

    ``--no-matches-table``: the new side writes deliveries only (they hold every match);
    the baseline writes what it always did, so the ratio prices the compact output.
    """
    from benchmarks.machine import machine_summary
    from core.formatting import format_table

    rev, corpus, seed, runs = str(options.compare), inputs.corpus, options.seed, options.runs
    posts, file_posts, matches_table = inputs.posts, inputs.file_posts, options.matches_table
    nodes, subscriptions, out = options.nodes, options.subscriptions, Path(options.out)

    print(f"machine: {machine_summary()}")
    rows: list[dict[str, object]] = []
    with worktree(rev) as (baseline, commit):
        print(f"baseline {rev} = {commit[:12]} in {baseline}; new = {TREE} (working tree)")
        scratch = Path(tempfile.mkdtemp(prefix="s3tm-compare-out-"))
        try:
            for workload in inputs.workloads:
                argv = [
                    "bench", "stream", "--workloads", workload, "--nodes", str(nodes),
                    "--subscriptions", str(subscriptions), "--posts", str(posts[workload]),
                    "--file-posts", str(file_posts[workload]), "--seed", str(seed),
                ]  # fmt: skip
                if corpus is not None:
                    argv += ["--corpus", str(corpus.resolve())]

                def one_run(tree: Path, run_out: Path, argv: list[str] = argv) -> dict[str, float]:
                    if tree == TREE and not matches_table:
                        argv = [*argv, "--no-matches-table"]
                    run_bench(tree, [*argv, "--out", str(run_out)])
                    row = read_csv_rows(run_out / "stream.csv")[0]
                    figures = {"posts/s": float(row["posts/s (steady)"])}
                    if row.get("noop posts/s"):
                        figures["noop posts/s"] = float(row["noop posts/s"])
                    return figures

                print(f"[{workload}] {runs} alternating runs per side", flush=True)
                old, new = alternate(baseline, runs, one_run, scratch / workload)
                base, mine = median(old.values, "posts/s"), median(new.values, "posts/s")
                rows.append(
                    {
                        "workload": workload if matches_table else f"{workload} (deliveries)",
                        "baseline_rev": commit[:12],
                        "baseline_posts_s": round(base),
                        "new_posts_s": round(mine),
                        "ratio": round(mine / base, 3),
                        "noop_posts_s": round(median(new.values, "noop posts/s")),
                        "runs": runs,
                        "baseline_min_max": min_max(old.values, "posts/s"),
                        "new_min_max": min_max(new.values, "posts/s"),
                    }
                )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    header = list(rows[0])
    print("\nstreaming matcher, steady posts/s, medians of alternating runs (same machine)")
    print(format_table(header, [[r[h] for h in header] for r in rows]))
    _write(_merged(out / "stream_compare.csv", rows, "workload"), out / "stream_compare.csv")
    return rows


def _report(rows: list[dict[str, object]], title: str, path: Path) -> None:
    """Print ``rows`` as a table under ``title`` and write them to ``path`` (CSV)."""
    from core.formatting import format_table

    header = list(rows[0])
    print(f"\n{title}")
    print(format_table(header, [[r[h] for h in header] for r in rows]))
    _write(rows, path)


def _merged(path: Path, rows: list[dict[str, object]], key: str) -> list[dict[str, object]]:
    """``rows`` after the rows already in ``path`` whose ``key`` they do not replace, so a
    run of one workload keeps the figures of the others."""
    if not path.exists():
        return rows
    new = {str(r[key]) for r in rows}
    kept: list[dict[str, object]] = [
        dict(r) for r in read_csv_rows(path) if r.get(key) not in new and set(r) == set(rows[0])
    ]
    return kept + rows


def compare_learn_job(rev: str, *, posts: int, nodes: int, seed: int, runs: int, out: Path):  # type: ignore[no-untyped-def]
    """The learn job at ``rev`` and here on the same ``gold.post_words``, alternating:
    wall seconds and the Python driver's peak RSS; ``learn_job_compare.csv``."""
    from benchmarks.learn_job import write_edges
    from benchmarks.machine import machine_summary
    from core.formatting import format_table

    print(f"machine: {machine_summary()}")
    root = Path(tempfile.mkdtemp(prefix="s3tm-compare-learn-"))
    try:
        edges = write_edges(root, posts, seed)
        print(f"wrote {edges:,} edges of {posts:,} synthetic posts to {root}", flush=True)

        def one_run(tree: Path, _: Path) -> dict[str, float]:
            # trees from before benchmarks/ moved out of the package hold it in s3tm/bench
            moved = (tree / "benchmarks" / "learn_job.py").is_file()
            module = "benchmarks.learn_job" if moved else "s3tm.bench.learn_job"
            result = run_json_child(tree, ["-m", module, str(root), str(nodes)], "learn job")
            return {"wall s": result["wall_s"], "driver MiB": result["python_peak_mib"]}

        with worktree(rev) as (baseline, commit):
            print(f"baseline {rev} = {commit[:12]}; new = {TREE} (working tree)", flush=True)
            old, new = alternate(baseline, runs, one_run, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    row = {
        "posts": posts,
        "nodes": nodes,
        "baseline_rev": commit[:12],
        "baseline_wall_s": round(median(old.values, "wall s"), 2),
        "new_wall_s": round(median(new.values, "wall s"), 2),
        "speedup": round(median(old.values, "wall s") / median(new.values, "wall s"), 2),
        "baseline_driver_mib": round(median(old.values, "driver MiB")),
        "new_driver_mib": round(median(new.values, "driver MiB")),
        "driver_ratio": round(
            median(new.values, "driver MiB") / median(old.values, "driver MiB"), 2
        ),
        "runs": runs,
    }
    print("\nlearn job (SALB+split), medians of alternating runs (same machine, same edges)")
    print(format_table(list(row), [list(row.values())]))
    _write([row], out / "learn_job_compare.csv")
    return row


@contextlib.contextmanager
def _one_core_sides(rev: str, what: str) -> Iterator[tuple[Path, Path, str]]:
    """For the one-core probes: prints the machine, yields (scratch folder, worktree of
    ``rev``, its commit id); both are removed afterwards."""
    from benchmarks.machine import machine_summary

    print(f"machine: {machine_summary()}; each run pinned to one core")
    scratch = Path(tempfile.mkdtemp(prefix=f"s3tm-compare-{what}-"))
    try:
        with worktree(rev) as (baseline, commit):
            print(f"baseline {rev} = {commit[:12]} in {baseline}; new = {TREE} (working tree)")
            yield scratch, baseline, commit
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def compare_learn(
    rev: str,
    *,
    sizes: Sequence[int],
    nodes: int,
    algorithms: Sequence[str],
    seed: int,
    runs: int,
    out: Path,
) -> list[dict[str, object]]:
    """``learn_mapping`` at ``rev`` and here on the same synthetic corpora, one core,
    alternating (:mod:`benchmarks.learn_probe`); ``learn_compare.csv``, and each side's
    growth from the smallest size to each larger one."""
    from benchmarks.learn_memory import save_synthetic

    probe = TREE / "benchmarks" / "learn_probe.py"
    rows: list[dict[str, object]] = []
    with _one_core_sides(rev, "learn") as (scratch, baseline, commit):
        for size in sizes:
            corpus, saved = save_synthetic(size, seed, scratch)
            print(
                f"[{size:,} posts, {corpus.n_edges:,} edges, N={nodes}] {runs} alternating "
                "runs per side",
                flush=True,
            )
            del corpus

            def one_run(tree: Path, _: Path, saved: Path = saved) -> dict[str, float]:
                figures = run_json_child(
                    tree, [str(probe), str(saved), str(nodes), ",".join(algorithms)], "learn"
                )
                return {f"{a} s": figures["seconds"][a] for a in algorithms}

            old, new = alternate(baseline, runs, one_run, scratch / f"runs-{size}")
            saved.unlink()
            for algorithm in algorithms:
                key = f"{algorithm} s"
                base, mine = median(old.values, key), median(new.values, key)
                rows.append(
                    {
                        "posts": size,
                        "algorithm": algorithm,
                        "n_matchers": nodes,
                        "baseline_rev": commit[:12],
                        "baseline_s": round(base, 4),
                        "new_s": round(mine, 4),
                        "speedup": round(base / mine, 3),
                        "runs": runs,
                        "baseline_runs_s": " ".join(f"{v[key]:.4f}" for v in old.values),
                        "new_runs_s": " ".join(f"{v[key]:.4f}" for v in new.values),
                    }
                )
    smallest = min(sizes)
    for row in rows:  # growth over the smallest size, per side (linear: posts / smallest)
        first = next(
            r for r in rows if r["posts"] == smallest and r["algorithm"] == row["algorithm"]
        )
        row["baseline_growth"] = round(float(row["baseline_s"]) / float(first["baseline_s"]), 2)  # type: ignore[arg-type]
        row["new_growth"] = round(float(row["new_s"]) / float(first["new_s"]), 2)  # type: ignore[arg-type]
    _report(
        rows,
        f"learn_mapping, one core, one learn per run, medians of {runs} alternating runs "
        f"(same machine, same saved corpus); growth = time / time at {smallest:,} posts",
        out / "learn_compare.csv",
    )
    return rows


def compare_matcher(options: MatcherBench, corpus: Path | None) -> list[dict[str, object]]:
    """The matcher index each tree's stream uses, on the same saved scenarios of ``corpus``
    (None: synthetic), alternating (:mod:`benchmarks.matcher_probe`);
    ``matcher_compare.csv``. Both sides must find exactly the same matches."""
    rev = str(options.compare)
    synthetic_subs = options.synthetic_subscriptions
    repeats = options.repeats
    runs, out = options.runs, Path(options.out)
    from benchmarks.matcher import scenarios

    probe = TREE / "benchmarks" / "matcher_probe.py"
    rows: list[dict[str, object]] = []
    with _one_core_sides(rev, "matcher") as (scratch, baseline, commit):
        for k, scenario in enumerate(scenarios(corpus, synthetic_subs)):
            saved = scratch / f"scenario-{k}.npz"
            scenario.save(saved)
            label = f"{scenario.name}, {scenario.n_subscriptions:,} subscriptions"

            indexes: dict[Path, str] = {}
            checksums: set[tuple[int, int]] = set()

            def one_run(
                tree: Path,
                _: Path,
                saved: Path = saved,
                indexes: dict[Path, str] = indexes,
                checksums: set[tuple[int, int]] = checksums,
            ) -> dict[str, float]:
                figures = run_json_child(
                    tree, [str(probe), str(saved), str(repeats)], "matcher probe"
                )
                indexes[tree] = figures["index"]
                checksums.add((figures["matches"], figures["checksum"]))
                return {"posts/s": figures["posts_s"], "build s": figures["build_s"]}

            print(f"[{label}] {runs} alternating runs per side", flush=True)
            old, new = alternate(baseline, runs, one_run, scratch / f"runs-{k}")
            if len(checksums) != 1:
                raise InputDataError(f"{label}: the two trees found different matches")
            base, mine = median(old.values, "posts/s"), median(new.values, "posts/s")
            rows.append(
                {
                    "scenario": scenario.name,
                    "subscriptions": scenario.n_subscriptions,
                    "baseline_posts_s": round(base),
                    "new_posts_s": round(mine),
                    "ratio": round(mine / base, 3),
                    "baseline_rev": commit[:12],
                    "baseline_index": indexes[baseline],
                    "new_index": indexes[TREE],
                    "runs": runs,
                    "baseline_min_max": min_max(old.values, "posts/s"),
                    "new_min_max": min_max(new.values, "posts/s"),
                    "baseline_build_s": round(median(old.values, "build s"), 3),
                    "new_build_s": round(median(new.values, "build s"), 3),
                }
            )
    _report(
        rows,
        f"matcher kernel, one core, posts/s best of {repeats} per run, medians of "
        "alternating runs (same machine, same saved input, identical matches)",
        out / "matcher_compare.csv",
    )
    return rows


def compare_drop(options: DropBench, corpus: Path | None) -> list[dict[str, object]]:
    """A drop level over the same raw lines of ``corpus`` (None: generated) in each tree,
    alternating, one core (:mod:`benchmarks.drop_probe`); ``drop_compare.csv``. Both trees
    must drop exactly the same lines."""
    rev = str(options.compare)
    lines = options.lines
    fraction = options.fraction
    repeats = options.repeats
    runs, out = options.runs, Path(options.out)
    from benchmarks.drop import save_input

    probe = TREE / "benchmarks" / "drop_probe.py"
    with _one_core_sides(rev, "drop") as (scratch, baseline, commit):
        lines_path, table_path, label = save_input(scratch, corpus, lines)
        masks: set[str] = set()

        def one_run(tree: Path, _: Path) -> dict[str, float]:
            figures = run_json_child(
                tree,
                [str(probe), str(lines_path), str(table_path), str(fraction), str(repeats)],
                "drop probe",
            )
            masks.add(figures["keep_sha1"])
            return {"us/line": figures["us_per_line"]}

        print(f"[{label}, drop {fraction:.0%}] {runs} alternating runs per side", flush=True)
        old, new = alternate(baseline, runs, one_run, scratch / "runs")
        if len(masks) != 1:
            raise InputDataError("the two trees dropped different lines")
        base, mine = median(old.values, "us/line"), median(new.values, "us/line")
        rows: list[dict[str, object]] = [
            {
                "lines": label,
                "drop_fraction": fraction,
                "baseline_rev": commit[:12],
                "baseline_us_per_line": round(base, 3),
                "new_us_per_line": round(mine, 3),
                "speed-up": round(base / mine, 2),
                "runs": runs,
                "baseline_min_max": min_max(old.values, "us/line", 3),
                "new_min_max": min_max(new.values, "us/line", 3),
            }
        ]
    _report(
        rows,
        f"a drop level on raw lines (value estimate + selection), one core, best of "
        f"{repeats} per run, medians of alternating runs (same lines, same lines dropped)",
        out / "drop_compare.csv",
    )
    return rows


def compare_changes(options: ChangesBench) -> list[dict[str, object]]:
    """What a round of subscription changes costs the stream's tasks in each tree, on the
    same generated input, alternating (:mod:`benchmarks.changes_probe`);
    ``changes_compare.csv``."""
    rev, subscriptions, posts = options.compare, options.subscriptions, options.posts
    runs, out = options.runs, Path(options.out)
    probe = TREE / "benchmarks" / "changes_probe.py"
    keys = {
        "first_round_ms": "cancellations, first round ms",
        "later_round_ms": "cancellations, later rounds ms",
        "build_s": "index build s",
        "encode_steady_s": "encode, steady s",
        "encode_after_growth_s": "encode after the vocabulary grew s",
    }
    with _one_core_sides(rev, "changes") as (scratch, baseline, commit):

        def one_run(tree: Path, _: Path) -> dict[str, float]:
            figures = run_json_child(
                tree, [str(probe), str(subscriptions), str(posts)], "changes probe"
            )
            return {key: float(figures[key]) for key in keys}

        print(
            f"[{subscriptions:,} subscriptions a matcher, {posts:,} texts] {runs} alternating "
            "runs per side",
            flush=True,
        )
        old, new = alternate(baseline, runs, one_run, scratch / "runs")
    rows: list[dict[str, object]] = []
    for key, label in keys.items():
        base, mine = median(old.values, key), median(new.values, key)
        rows.append(
            {
                "figure": label,
                "subscriptions": subscriptions,
                "texts": posts,
                "baseline": round(base, 6),
                "new": round(mine, 6),
                # three significant figures: a ratio far below 1 keeps its precision
                "new / baseline": float(f"{mine / base:.3g}") if base else None,
                "baseline_rev": commit[:12],
                "runs": runs,
                "baseline_min_max": min_max(old.values, key, 4),
                "new_min_max": min_max(new.values, key, 4),
            }
        )
    _report(
        rows,
        "what a round of changes costs the tasks, one core, medians of alternating runs "
        "(same machine, same generated input)",
        out / "changes_compare.csv",
    )
    return rows
