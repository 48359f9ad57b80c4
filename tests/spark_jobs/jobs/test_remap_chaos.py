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
    tmp_path, spark, spark_process_env, engine
):
    """With each Delta engine committing the jobs' DataFrame writes. A kill is a child
    process (``spark-submit``'s script, SIGKILLed at its kill point); the steps between the
    kills run on this worker's session, as the same jobs' ``run``."""
    spark_process_env = {**spark_process_env, "S3TM_DELTA_ENGINE": engine}
    from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
    from spark_jobs.jobs import evaluate, learn, pipeline, place, publish
    from spark_jobs.lake.corpus_files import write_demo_corpus
    from spark_jobs.lake.subscription_store import add_subscriptions

    root, landing = tmp_path / "lakehouse", tmp_path / "landing"
    spec = SyntheticCorpusSpec(n_posts=1500, n_words=800, seed=4)
    write_demo_corpus(landing / "posts.jsonl.gz", spec, days=2)
    lake = Lakehouse(None, root)
    session_lake = Lakehouse(spark, root, engine=engine)
    words = list(generate_corpus(spec).vocabulary[:40])  # subscribed words the posts hold
    add_subscriptions(
        lake, [f"{a} {b}" for a, b in zip(words[::2], words[1::2], strict=True)], "alice"
    )
    first = pipeline.run(pipeline.PipelineConfig(landing=str(landing), nodes=4), session_lake)
    assert first == 0
    before = _visible(lake)
    assert before[0] is not None and before[1] and before[2]

    learn_5 = learn.LearnConfig(nodes=5, algorithm="salb", split=False)
    steps = [
        ("learn.py", ["--nodes", "5", "--algorithm", "salb", "--no-split"], "learn:after-mapping"),
        ("learn", lambda: learn.run(learn_5, session_lake), None),
        ("place.py", [], "place:before-commit"),
        ("place", lambda: place.run(place.PlaceConfig(), session_lake), None),
        ("evaluate", lambda: evaluate.run(evaluate.EvaluateConfig(), session_lake), None),
        (
            "validate",
            lambda: publish.run(publish.RoutingValidate(), session_lake),
            None,
        ),
        ("publish.py", ["publish"], "publish:before-commit"),
    ]
    for step, how, crash in steps:
        if crash:
            done = _job(root, spark_process_env, step, *how, crash=crash)
            assert done.returncode == 137, f"{crash} did not fire: {done.stderr[-1500:]}"
        else:
            assert how() == 0, step
        assert _visible(lake) == before, f"the published state changed after {step} {crash}"
        _complete(lake)

    assert publish.run(publish.RoutingPublish(), session_lake) == 0  # the rerun
    live, mapping, placements = _visible(lake)
    assert live != before[0] and mapping and placements
    statuses = {r["routing_version"]: r["status"] for r in versions(lake)}
    assert statuses[before[0]] == "retired" and statuses[live] == "published"
    assert list(statuses.values()).count("published") == 1
