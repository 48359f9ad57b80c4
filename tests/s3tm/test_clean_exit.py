"""Short commands exit with 0 and a clean stderr, every time.

Reading a Delta table through ``DeltaTable.to_pyarrow_table()`` made about one process in
ten abort at interpreter exit (SIGABRT, ``terminate called without an active exception``,
delta-rs issue 2184) after its work was done. Each command below runs many times in a fresh
process: a Spark job that starts a SparkSession and reads Delta tables (8 runs: a JVM start
costs ~20 s), the read-only commands ``routing list`` and ``subscribe list`` (no JVM), and
a plain delta-rs read (the Airflow tasks' path, where the abort came from: 40 runs, so a
one-in-ten abort slips through with probability 0.9^40, 1.5%).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

RUNS = {
    "Spark read (JVM)": 8,
    "routing list (no JVM)": 10,
    "subscribe list (no JVM)": 10,
    "delta-rs read (no JVM)": 40,
}


def _runs(name: str) -> int:
    """How many times the command called ``name`` runs."""
    return RUNS[name]


@pytest.fixture(scope="module")
def small_lakehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lakehouse with subscriptions, one published version and a batch plan, written
    by delta-rs alone (no Spark needed to write the driver-side tables)."""
    from core.corpus.arrays import corpus_from_word_lists
    from core.learn import learn_mapping
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.routing_store import add_version, now_utc, write_mapping
    from spark_jobs.lake.subscription_store import add_subscriptions

    root = tmp_path_factory.mktemp("clean-exit") / "lakehouse"
    lake = Lakehouse(None, root)
    add_subscriptions(lake, ["white house", "vote", "election night"], "alice")
    posts = [["white", "hous"], ["elect", "night"], ["hous", "vote"], ["vote"]] * 10
    routing = learn_mapping(corpus_from_word_lists(posts), 4, "salb").table
    write_mapping(lake, 1, routing)
    add_version(
        lake,
        {
            "routing_version": 1,
            "algorithm": "salb",
            "n_matchers": 4,
            "params": json.dumps({"label": "salb"}),
            "inputs": "{}",
            "subscribed_words": [],
            "metrics": None,
            "validation": None,
            "status": "published",
            "created_at": now_utc(),
            "published_at": now_utc(),
            "retired_at": None,
        },
    )
    # five words, unsplit: one row each (the commands below read them back)
    assert lake.read_arrow("routing.mappings").num_rows == routing.to_frame().shape[0] == 5
    return root


def _run(argv: list[str], base_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**base_env, "PYTHONFAULTHANDLER": "0"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, check=False)


def _commands(root: Path) -> dict[str, list[str]]:
    s3tm = [sys.executable, "-m", "s3tm.cli.main"]
    read_without_jvm = (
        "import sys\n"
        "from spark_jobs.lake.delta_io import Lakehouse\n"
        "lake = Lakehouse(None, sys.argv[1])\n"
        "assert lake.read_arrow('routing.mappings').num_rows == 5\n"
        "assert lake.read_arrow('subscriptions.registry').num_rows == 3\n"
        "assert lake.read_arrow('routing.versions').num_rows == 1\n"
        "print('ok')\n"
    )
    read_with_spark = (
        "import sys\n"
        "from spark_jobs.lake.delta_io import Lakehouse\n"
        "from spark_jobs.lake.session import build_session\n"
        "spark = build_session('s3tm-clean-exit', master='local[1]')\n"
        "lake = Lakehouse(spark, sys.argv[1])\n"
        "assert lake.read('routing.mappings').count() == 5\n"
        "assert lake.read('subscriptions.registry').count() == 3\n"
        "print('ok')\n"
    )
    return {
        "Spark read (JVM)": [sys.executable, "-c", read_with_spark, str(root)],
        "routing list (no JVM)": [*s3tm, "routing", "list", "--lakehouse", str(root)],
        "subscribe list (no JVM)": [*s3tm, "subscribe", "list", "--lakehouse", str(root)],
        "delta-rs read (no JVM)": [sys.executable, "-c", read_without_jvm, str(root)],
    }


def test_short_commands_never_abort_at_exit(small_lakehouse, spark_process_env):
    commands = _commands(small_lakehouse)
    jobs = [(name, argv) for name, argv in commands.items() for _ in range(_runs(name))]
    # Two at a time: the machine has two cores and each Spark command starts a JVM.
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda job: (job[0], _run(job[1], spark_process_env)), jobs))
    failures = [
        f"{name}: exit {r.returncode}: {r.stderr.strip()[-300:]}"
        for name, r in results
        if r.returncode != 0 or "terminate called" in r.stderr
    ]
    assert len(results) == sum(_runs(name) for name in commands)
    assert failures == [], f"{len(failures)} of {len(results)} runs failed:\n" + "\n".join(
        failures[:5]
    )
    # The commands did their work, not just exit 0.
    listed = [r.stdout for name, r in results if name.startswith("routing list")]
    assert all("salb" in out for out in listed), listed[0]
    subscribed = [r.stdout for name, r in results if name.startswith("subscribe list")]
    assert all("hous" in out and "white" in out for out in subscribed), subscribed[0]
    assert all(r.stdout.strip() == "ok" for name, r in results if name.endswith("read (JVM)"))
