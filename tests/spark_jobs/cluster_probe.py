"""Run by ``spark-submit`` in the standalone-cluster test: what a job's session was left
with (the settings spark-submit gave, the master) and the task slots the stream would plan
with, before and after the test adds a worker.

Prints one JSON line per reading; between the two it waits for ``<folder>/added`` (the
test writes it once the new worker registered), then until the slots change (a deadline
and its reason on failure, never a fixed sleep).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from spark_jobs.lake.session import build_session
from spark_jobs.stream.pipeline import task_slots

DEADLINE_S = 120


def reading(spark) -> dict[str, object]:
    # a job on every executor: executors register lazily, the slots count those up
    spark.sparkContext.parallelize(range(64), 8).count()
    return {
        "master": spark.sparkContext.master,
        "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "default_parallelism": spark.sparkContext.getConf().get("spark.default.parallelism"),
        "time_zone": spark.conf.get("spark.sql.session.timeZone"),
        "task_slots": task_slots(spark),
    }


def wait_for(what: str, ready) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not ready():
        if time.monotonic() > deadline:
            print(json.dumps({"error": f"waited {DEADLINE_S} s for {what}"}), flush=True)
            raise SystemExit(1)
        time.sleep(0.5)


def main(folder: Path, expect_slots: int) -> int:
    spark = build_session("s3tm-cluster-probe")
    wait_for(f"{expect_slots} task slots", lambda: task_slots(spark) >= expect_slots)
    first = reading(spark)
    print(json.dumps(first), flush=True)
    (folder / "first").write_text(json.dumps(first))
    wait_for("the test to add a worker", (folder / "added").exists)
    before = first["task_slots"]
    assert isinstance(before, int)
    wait_for("the added worker's executor", lambda: task_slots(spark) > before)
    print(json.dumps(reading(spark)), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]), int(sys.argv[2])))
