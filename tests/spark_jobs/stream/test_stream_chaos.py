"""Chaos: the streaming job killed at seeded kill points over the whole batch (the plan
write, the sync, the route / match / dispatch tasks, each Delta commit, the batch record),
restarted after each kill. Final ``matches`` and ``deliveries`` equal brute force exactly:
nothing lost, nothing duplicated, every bad record quarantined once."""

from __future__ import annotations

import json
import random

import pytest

from spark_jobs.failpoints import DRIVER_POINTS, TASK_POINTS
from spark_jobs.lake.subscription_store import register_word_sets
from tests.spark_jobs.stream import harness

SEED = 20261122
# one micro-batch each (--max-files-per-trigger 1): the 11 kill points fall on the first
# batch (nothing committed yet), on middle ones and on the last; six batches ran 18 more
# batches over the 9 parts for no point that four lack
FILES = 4
# the schedule runs in halves, each on its own scene and with its own final check: a JVM
# start per kill point makes the whole schedule 3-5 minutes on 2 cores, and no test may take
# more than 3. Each part more is a scene and a final run more: 25-30 s of CPU (delta-spark's
# commits, the slowest, ran in thirds of 68-94 s each: halves are some 120 s at the slowest)
HALVES = (0, 1)


def kill_schedule(seed: int, batches: int) -> list[tuple[int, str]]:
    """Every kill point once, each at a seeded batch, in the order the runs meet them."""
    rng = random.Random(seed)
    points = list(DRIVER_POINTS + TASK_POINTS)
    rng.shuffle(points)
    return sorted((rng.randrange(batches), point) for point in points)


def part_schedule(seed: int, batches: int, part: int, parts: int) -> list[tuple[int, str]]:
    """Every ``parts``-th kill point of :func:`kill_schedule` from ``part``, in batch order."""
    return kill_schedule(seed, batches)[part::parts]


def test_the_schedule_covers_every_kill_point_in_batch_order():
    schedule = kill_schedule(SEED, FILES)
    assert sorted(p for _, p in schedule) == sorted(DRIVER_POINTS + TASK_POINTS)
    assert len(schedule) >= 10
    assert [b for b, _ in schedule] == sorted(b for b, _ in schedule)
    split = [part_schedule(SEED, FILES, k, len(HALVES)) for k in HALVES]
    assert sorted(p for s in split for p in s) == schedule and all(len(s) >= 2 for s in split)


def chaos_scene(lakehouse, tmp_path, batches: int, per_batch: int):
    """Registered subscriptions, a published version, and ``batches`` landed files of
    ``per_batch`` records each, one of them bad (for the quarantine commit)."""
    landing = harness.Landing(tmp_path / "landing", seed=5)
    sets = harness.subscription_sets(landing, 200, seed=6)
    for owner in range(3):
        register_word_sets(
            lakehouse, [" ".join(s) for s in sets[owner::3]], sets[owner::3], f"user{owner}"
        )
    harness.publish_learned(lakehouse, landing, 4, "salb", split=True)
    posts: list[str] = []
    for k in range(batches):
        posts += landing.write(per_batch - 1, bad=[json.dumps({"id": f"bad{k}", "text": "  "})])
    return landing, posts


def kill_at_every_point_then_check(
    lakehouse, landing, posts, checkpoint, batches, part, source=None, engine=None
):
    """Run the stream killed at each point of the schedule's half ``part``,
    restart it once more to the end, and check matches and deliveries against brute force
    and each bad record quarantined once. ``engine``: the Delta engine committing the
    batches' outputs."""
    killed = []
    for batch, point in part_schedule(SEED, batches, part, len(HALVES)):
        # a killed run skips the warm-up (its workers load the kernels in its first batch):
        # a kill point is in a batch, and the warm-up writes nothing the batches read; the
        # final run warms up as the job does by default
        run = harness.run_stream_process(
            lakehouse,
            landing,
            checkpoint,
            f"{point}:{batch}",
            ["--no-warm-up"],
            source=source,
            engine=engine,
        )
        killed.append((point, batch, run.returncode))
        assert run.returncode != 0, f"{point}:{batch} did not fire: {run.stderr[-1500:]}"
    final = harness.run_stream_process(
        lakehouse, landing, checkpoint, None, source=source, engine=engine
    )
    assert final.returncode == 0, final.stderr[-2000:]
    assert {code for _, _, code in killed} <= {137, -9}, killed

    harness.assert_exact(lakehouse, landing, posts, at_least=200)
    quarantine = lakehouse.read_arrow("silver.posts_quarantine").to_pylist()
    assert sorted(r["post_id"] for r in quarantine) == sorted(f"bad{k}" for k in range(batches))


def killed_at_every_point(lakehouse, tmp_path, engine: str, part: int) -> None:
    """With each Delta engine committing matches and deliveries (delta-spark: the staged
    rows written with format("delta") and the batch's txnAppId/txnVersion)."""
    landing, posts = chaos_scene(lakehouse, tmp_path, FILES, 121)
    kill_at_every_point_then_check(
        lakehouse, landing, posts, tmp_path / "checkpoint", FILES, part, engine=engine
    )
    if engine == "spark":  # delta-spark wrote the outputs' commits
        engines = {
            c.get("engineInfo", "").split("/")[0]
            for c in lakehouse.delta_table("matches").history()
            if c.get("operation") == "WRITE"
        }
        assert any(e.startswith("Apache-Spark") for e in engines), engines


# delta-spark's parts are in test_stream_chaos_delta_spark.py: a file of its own, so that
# the two workers take them in parallel with these (the suite distributes by file)
@pytest.mark.parametrize("half", HALVES)
def test_stream_killed_at_every_point_restarts_exactly(lakehouse, tmp_path, half):
    killed_at_every_point(lakehouse, tmp_path, "rs", half)
