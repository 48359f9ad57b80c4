"""The side-by-side runner: a worktree of a revision appears and goes, runs alternate."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from benchmarks import compare
from benchmarks.options import ChangesBench, DropBench
from core.errors import InputDataError


def test_worktree_of_a_revision_is_created_and_removed():
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=compare.TREE, capture_output=True, text=True, check=True
    ).stdout.strip()
    with compare.worktree("HEAD") as (tree, commit):
        assert commit == head
        assert (tree / "pyproject.toml").is_file() and (tree / "s3tm").is_dir()
        listed = subprocess.run(
            ["git", "worktree", "list"], cwd=compare.TREE, capture_output=True, text=True
        ).stdout
        assert str(tree) in listed
    assert not tree.exists()
    listed = subprocess.run(
        ["git", "worktree", "list"], cwd=compare.TREE, capture_output=True, text=True
    ).stdout
    assert str(tree) not in listed


def test_an_unknown_revision_is_a_clear_error():
    with pytest.raises(InputDataError, match="rev-parse"), compare.worktree("no-such-rev-xyz"):
        pass


def test_runs_alternate_and_medians_are_per_side(tmp_path):
    calls: list[Path] = []
    baseline = tmp_path / "baseline"

    def one_run(tree: Path, out: Path) -> dict[str, float]:
        calls.append(tree)
        return {"posts/s": 100.0 * len(calls)}

    old, new = compare.alternate(baseline, 3, one_run, tmp_path)
    assert calls == [baseline, compare.TREE] * 3
    assert [v["posts/s"] for v in old.values] == [100.0, 300.0, 500.0]
    assert compare.median(new.values, "posts/s") == 400.0


def test_a_compare_of_one_workload_keeps_the_other_workloads_rows(tmp_path):
    from benchmarks.compare import _merged, _write

    path = tmp_path / "stream_compare.csv"
    _write([{"workload": "tweet", "ratio": 1.1}, {"workload": "topic", "ratio": 1.7}], path)
    merged = _merged(path, [{"workload": "topic", "ratio": 3.1}], "workload")
    assert merged == [{"workload": "tweet", "ratio": "1.1"}, {"workload": "topic", "ratio": 3.1}]
    # rows of another layout are not mixed in
    assert _merged(path, [{"workload": "topic", "other": 1}], "workload") == [
        {"workload": "topic", "other": 1}
    ]
    assert _merged(tmp_path / "absent.csv", [{"workload": "x"}], "workload") == [{"workload": "x"}]


def test_learn_compare_times_both_trees_on_the_same_corpus(tmp_path, capsys):
    # HEAD against the working tree: both sides learn the same saved corpora in a child each.
    started = time.perf_counter()
    rows = compare.compare_learn(
        "HEAD", sizes=[3_000, 6_000], nodes=8, algorithms=["salb"], seed=1, runs=1, out=tmp_path
    )
    wall_s = time.perf_counter() - started
    assert [(r["posts"], r["algorithm"]) for r in rows] == [(3_000, "salb"), (6_000, "salb")]
    # both sides timed, each within the comparison's own wall time
    assert sum(float(r["baseline_s"]) + float(r["new_s"]) for r in rows) <= wall_s
    for row in rows:
        ratio = float(row["baseline_s"]) / float(row["new_s"])  # of the rounded seconds
        assert row["speedup"] == pytest.approx(ratio, rel=0.02)
    assert rows[0]["new_growth"] == 1.0
    written = compare.read_csv_rows(tmp_path / "learn_compare.csv")
    assert [int(r["posts"]) for r in written] == [3_000, 6_000]
    assert "growth = time / time at 3,000 posts" in capsys.readouterr().out


def test_learn_compare_rejects_unknown_algorithms(tmp_path, capsys):
    from s3tm.cli.main import main

    argv = ["bench", "learn", "--compare", "HEAD", "--algorithms", "nope", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "--algorithms must list some of" in capsys.readouterr().err


def test_drop_compare_checks_both_trees_drop_the_same_lines(tmp_path):
    # HEAD against the working tree on generated posts (no corpus): a drop of 60%
    options = DropBench(
        compare="HEAD", lines=5_000, fraction=0.6, repeats=1, runs=1, out=str(tmp_path)
    )
    rows = compare.compare_drop(options, None)
    (row,) = rows
    assert row["lines"] == "5,000 lines of generated posts"
    # each side's figure is the median of its runs (within their range) and the speed-up
    # their ratio
    for side in ("baseline", "new"):
        low, high = (float(x) for x in row[f"{side}_min_max"].split("-"))
        assert 0 < low <= float(row[f"{side}_us_per_line"]) <= high
    ratio = float(row["baseline_us_per_line"]) / float(row["new_us_per_line"])
    assert row["speed-up"] == pytest.approx(ratio, abs=0.01)
    written = compare.read_csv_rows(tmp_path / "drop_compare.csv")
    assert written[0]["drop_fraction"] == "0.6"


def test_the_drop_probe_drops_the_share_asked_for(tmp_path):
    from benchmarks.drop import save_input
    from benchmarks.drop_probe import main as probe

    lines, table, _ = save_input(tmp_path, None, 2_000)
    figures = probe(str(lines), str(table), 0.5, 1)
    assert figures["lines"] == 2_000
    # half of the lines outside the 2% exempt sample go
    assert 950 <= figures["dropped"] <= 1_000
    again = probe(str(lines), str(table), 0.5, 1)
    assert again["keep_sha1"] == figures["keep_sha1"]  # the same lines go every time


def test_bench_drop_refuses_a_fraction_outside_0_1(tmp_path, capsys):
    from s3tm.cli.main import main

    argv = ["bench", "drop", "--compare", "HEAD", "--fraction", "1.5", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "--fraction must lie in (0, 1)" in capsys.readouterr().err


@pytest.mark.spark
def test_bench_drop_spark_times_each_stage_of_a_dropped_line(spark, tmp_path, capsys):
    from s3tm.cli.main import main

    argv = ["bench", "drop", "--spark", "--lines", "3000", "--repeats", "1", "--out", str(tmp_path)]
    started = time.perf_counter()
    assert main(argv) == 0
    wall_s = time.perf_counter() - started
    (row,) = compare.read_csv_rows(tmp_path / "drop_spark.csv")
    stages = ["read (JVM only)", "read + hand over to Python", "read + hand over + drop"]
    # the three stages ran one after the other within the command's wall time
    seconds = [3000 * float(row[f"{s} us/line"]) / 1e6 for s in stages]
    assert 0.0 < min(seconds) <= sum(seconds) <= wall_s
    assert float(row["drop_fraction"]) == 0.75
    assert "wall time in the stream's shape" in capsys.readouterr().out


def test_bench_drop_needs_a_revision_or_spark(tmp_path, capsys):
    from s3tm.cli.main import main

    assert main(["bench", "drop", "--out", str(tmp_path)]) == 2
    assert "give --compare REV" in capsys.readouterr().err


def test_changes_compare_times_both_trees_on_the_same_input(tmp_path, capsys):
    # HEAD against the working tree: the probe's figures of a round of changes, each side
    started = time.perf_counter()
    options = ChangesBench(
        compare="HEAD", subscriptions=3_000, posts=300, runs=1, out=str(tmp_path)
    )
    rows = compare.compare_changes(options)
    wall_ms = 1e3 * (time.perf_counter() - started)
    assert [r["figure"] for r in rows][:2] == [
        "cancellations, first round ms",
        "cancellations, later rounds ms",
    ]
    for row in rows:
        # measured, within the comparison's own wall time
        assert 0.0 < float(row["baseline"]) <= wall_ms and 0.0 < float(row["new"]) <= wall_ms
        assert row["new / baseline"] == pytest.approx(row["new"] / row["baseline"], rel=0.05)
    written = compare.read_csv_rows(tmp_path / "changes_compare.csv")
    assert len(written) == len(rows) and written[0]["runs"] == "1"
    assert "what a round of changes costs the tasks" in capsys.readouterr().out


def test_the_changes_command_refuses_sizes_too_small_to_measure(capsys):
    from s3tm.cli.main import main

    assert main(["bench", "changes", "--compare", "HEAD", "--subscriptions", "10"]) == 2
    assert "--subscriptions must be >= 1200" in capsys.readouterr().err
