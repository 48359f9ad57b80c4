"""DAG integrity: every DAG imports, has tags, owner, retries, docs; parsing touches no
database. The DAGs end to end under `airflow dags test` are the demo's
(tests/s3tm/test_airflow_command.py: one demo serves those tests)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.dags.conftest import embedded_env

REPO = Path(__file__).resolve().parents[2]
AIRFLOW = Path(sys.executable).with_name("airflow")


def test_dag_integrity_without_a_database(tmp_path):
    # A database URL that cannot be opened: parsing must not need it.
    env = embedded_env(
        tmp_path / "home",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=(f"sqlite:///{tmp_path}/missing/dir/airflow.db"),
    )
    code = textwrap.dedent("""
        import json
        from airflow.models.dagbag import DagBag
        bag = DagBag(dag_folder=%r)
        print(json.dumps({"errors": {k: str(v)[:300] for k, v in bag.import_errors.items()},
                          "dags": {d.dag_id: {"tags": sorted(d.tags), "doc": bool(d.doc_md),
                                              "owners": sorted({t.owner for t in d.tasks}),
                                              "retries": sorted({t.retries for t in d.tasks}),
                                              "tasks": sorted(t.task_id for t in d.tasks),
                                              "cron": getattr(getattr(d.timetable, "timetable",
                                                  d.timetable), "_expression", None),
                                              "run_immediately": str(getattr(getattr(
                                                  d.timetable, "timetable", d.timetable),
                                                  "_run_immediately", None)),
                                              "start_date": str(d.start_date),
                                              "assets": sorted(a.name for _, a in
                                                  d.timetable.asset_condition.iter_assets())
                                                  if hasattr(d.timetable, "asset_condition")
                                                  else []}
                                   for d in bag.dags.values()}}))
    """) % str(REPO / "dags")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}
    assert set(result["dags"]) == {"s3tm_ingest", "s3tm_remap", "s3tm_maintenance", "s3tm_monitor"}
    for dag in result["dags"].values():
        assert dag["doc"] and "s3tm" in dag["tags"]
        assert dag["owners"] == ["s3tm-platform"]
    assert not (tmp_path / "missing").exists()
    tasks = {d: result["dags"][d]["tasks"] for d in result["dags"]}
    assert tasks["s3tm_ingest"] == ["ingest", "normalise"]
    assert tasks["s3tm_maintenance"] == ["maintain"]
    assert "request_remap" in tasks["s3tm_monitor"]
    assert {"learn", "place", "validate", "evaluate", "publish"} <= set(tasks["s3tm_remap"])
    # What each DAG's doc (and `s3tm airflow`'s start-up message) says of its schedule is
    # the schedule it has; starting Airflow never fires a missed slot.
    from devtools.local.airflow.standalone import dag_schedules

    for dag_id, said in dag_schedules().items():
        dag = result["dags"][dag_id]
        assert said.startswith(f"`{dag['cron']}` (UTC"), (dag_id, said, dag["cron"])
        # never the slot just missed: a zero catch-up window, and no start_date (Airflow
        # ignores run_immediately when one restricts the timetable)
        assert (dag["run_immediately"], dag["start_date"]) == ("0:00:00", "None"), dag_id
        for name in dag["assets"]:
            assert f"`{name}` asset" in said, (dag_id, said, dag["assets"])
        assert ("asset" in said) == bool(dag["assets"]), (dag_id, said)
