"""The side-by-side runner: a worktree of a revision appears and goes, runs alternate."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from core.errors import InputDataError
from s3tm.bench import compare


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
    from s3tm.bench.compare import _merged, _write

    path = tmp_path / "stream_compare.csv"
    _write([{"workload": "tweet", "ratio": 1.1}, {"workload": "topic", "ratio": 1.7}], path)
    merged = _merged(path, [{"workload": "topic", "ratio": 3.1}], "workload")
    assert merged == [{"workload": "tweet", "ratio": "1.1"}, {"workload": "topic", "ratio": 3.1}]
    # rows of another layout are not mixed in
    assert _merged(path, [{"workload": "topic", "other": 1}], "workload") == [
        {"workload": "topic", "other": 1}
    ]
    assert _merged(tmp_path / "absent.csv", [{"workload": "x"}], "workload") == [{"workload": "x"}]
