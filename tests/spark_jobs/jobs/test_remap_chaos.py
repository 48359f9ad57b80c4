"""Chaos for the remap chain: each step killed in the middle (between a candidate's mapping
and its row, before the placements' commit, between the publish decision and its commit).
After every kill the published version, its mapping and its placements are exactly what
they were (nothing half-written or half-published is visible to the stream), and a rerun
of the chain completes and publishes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.routing_store import published_version, versions

REPO = Path(__file__).resolve().parents[3]


def _job(root: Path, base_env: dict[str, str], script: str, *args: str, crash: str | None = None):
    env = {k: v for k, v in base_env.items() if k != "S3TM_CRASH"}
    if crash:
        env["S3TM_CRASH"] = crash
    return subprocess.run(
        [
            sys.executable,
            str(REPO / "spark_jobs" / "jobs" / script),
            "--lakehouse",
            str(root),
            "--master",
            "local[2]",
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _visible(lake: Lakehouse) -> tuple:
    """What the stream would load: the published version, its mapping and placements."""
    live = published_version(lake)
    mapping = sorted(
        (r["word"], r["part"], r["matcher_id"])
        for r in lake.read_arrow("routing.mappings").to_pylist()
        if r["routing_version"] == live
    )
    placements = sorted(
        (r["sub_id"], r["matcher_id"])
        for r in lake.read_arrow("routing.placements").to_pylist()
        if r["routing_version"] == live
    )
    return live, mapping, placements


def _complete(lake: Lakehouse) -> None:
    """Every version with a row has its whole mapping (no half-written version)."""
    mapped = {r["routing_version"] for r in lake.read_arrow("routing.mappings").to_pylist()}
    assert {r["routing_version"] for r in versions(lake)} <= mapped


@pytest.mark.parametrize("engine", ["rs", "spark"])
def test_remap_killed_in_every_step_leaves_the_published_version_intact(
    tmp_path, spark_process_env, engine
):
    """With each Delta engine committing the jobs' DataFrame writes."""
    spark_process_env = {**spark_process_env, "S3TM_DELTA_ENGINE": engine}
    from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus, write_demo_corpus
    from spark_jobs.lake.subscription_store import add_subscriptions

    root, landing = tmp_path / "lakehouse", tmp_path / "landing"
    spec = SyntheticCorpusSpec(n_posts=1500, n_words=800, seed=4)
    write_demo_corpus(landing / "posts.jsonl.gz", spec, days=2)
    lake = Lakehouse(None, root)
    words = list(generate_corpus(spec).vocabulary[:40])  # subscribed words the posts hold
    add_subscriptions(
        lake, [f"{a} {b}" for a, b in zip(words[::2], words[1::2], strict=True)], "alice"
    )
    first = _job(root, spark_process_env, "pipeline.py", "--landing", str(landing), "--nodes", "4")
    assert first.returncode == 0, first.stderr[-2000:]
    before = _visible(lake)
    assert before[0] is not None and before[1] and before[2]

    steps = [
        ("learn.py", ["--nodes", "5", "--algorithm", "salb", "--no-split"], "learn:after-mapping"),
        ("learn.py", ["--nodes", "5", "--algorithm", "salb", "--no-split"], None),
        ("place.py", [], "place:before-commit"),
        ("place.py", [], None),
        ("evaluate.py", [], None),
        ("publish.py", ["validate"], None),
        ("publish.py", ["publish"], "publish:before-commit"),
    ]
    for script, args, crash in steps:
        done = _job(root, spark_process_env, script, *args, crash=crash)
        if crash:
            assert done.returncode == 137, f"{crash} did not fire: {done.stderr[-1500:]}"
        else:
            assert done.returncode == 0, done.stderr[-2000:]
        assert _visible(lake) == before, f"the published state changed after {script} {crash}"
        _complete(lake)

    rerun = _job(root, spark_process_env, "publish.py", "publish")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    live, mapping, placements = _visible(lake)
    assert live != before[0] and mapping and placements
    statuses = {r["routing_version"]: r["status"] for r in versions(lake)}
    assert statuses[before[0]] == "retired" and statuses[live] == "published"
    assert list(statuses.values()).count("published") == 1
