"""A DAG builds each Spark job's command line from the job's config type
(``spark_jobs.options.job_argv``), and its params default to that config's values: the
argv a scheduled run renders parses back into the config the jobs module declares for it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.jobs.configs import (
    SCHEDULED_WINDOW_DAYS,
    GraphConfig,
    IngestConfig,
    LearnConfig,
    NormaliseConfig,
    scheduled_learn,
)
from spark_jobs.options import Template, job_argv, parse_job
from tests.dags.conftest import embedded_env

REPO = Path(__file__).resolve().parents[2]


def _round_trip(config: object) -> object:
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}  # type: ignore[arg-type]
    values.pop("kafka_security", None)  # never an option: the environment's
    parsed, _ = parse_job(type(config), job_argv(type(config), **values), prog="t", description="")
    return parsed


@given(
    nodes=st.integers(1, 512),
    algorithm=st.sampled_from(["hash", "salb", "salb2", "gFCL"]),
    split=st.booleans(),
    max_moved=st.floats(0, 1, allow_nan=False),
    window_days=st.integers(0, 60),
    end=st.none() | st.dates(dt.date(2000, 1, 1), dt.date(2100, 1, 1)),
    as_of=st.none() | st.datetimes(timezones=st.just(dt.UTC)),
    seed=st.integers(0, 2**31),
)
def test_a_learn_config_survives_its_command_line(
    nodes, algorithm, split, max_moved, window_days, end, as_of, seed
):
    config = LearnConfig(
        nodes=nodes,
        algorithm=algorithm,
        split=split,
        incremental=algorithm == "salb2" and split,
        max_moved=max_moved,
        window_days=window_days,
        end=end,
        as_of=as_of,
        seed=seed,
    )
    assert _round_trip(config) == config


@pytest.mark.parametrize(
    "config",
    [
        GraphConfig(start=dt.date(2026, 1, 1), end=dt.date(2026, 1, 9), cooccurrence=True),
        IngestConfig(
            source="kafka",
            landing="s3://bucket/landing",
            sample_rate=0.25,
            batch_id=20260101020000,
            dated_until=dt.datetime(2026, 1, 1, 2, tzinfo=dt.UTC),
            dedupe_days=-1,
        ),
        NormaliseConfig(sample_rate=0.5, seed=3),
    ],
    ids=type,
)
def test_each_jobs_config_survives_its_command_line(config):
    assert _round_trip(config) == config


def test_an_option_the_job_lacks_fails_where_the_dag_names_it():
    with pytest.raises(TypeError, match="no option"):
        job_argv(GraphConfig, window=Template("params.window_days"))


def test_a_templated_flag_renders_to_the_flag_or_its_negation():
    (flag,) = job_argv(LearnConfig, split=Template("params.split"))
    render = jinja2.Template(flag).render
    assert (render(params={"split": True}), render(params={"split": False})) == (
        "--split",
        "--no-split",
    )


def _scheduled_tasks(tmp_path: Path) -> dict[str, dict]:
    """Every Spark task of the DAGs, as the DAG processor parses them: its application,
    its argv templates and its DAG's param defaults."""
    code = textwrap.dedent("""
        import json
        from airflow.models.dagbag import DagBag
        bag = DagBag(dag_folder=%r)
        assert not bag.import_errors, bag.import_errors
        tasks = {}
        for dag in bag.dags.values():
            defaults = {k: dag.params[k] for k in dag.params}
            for task in dag.tasks:
                if task.task_type == "SparkSubmitOperator":
                    tasks[f"{dag.dag_id}.{task.task_id}"] = {
                        "application": task.application,
                        "args": list(task.application_args),
                        "params": defaults,
                    }
        print(json.dumps(tasks, default=str))
    """) % str(REPO / "dags")
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=embedded_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_dags_argv_defaults_are_the_jobs_configs(tmp_path):
    tasks = _scheduled_tasks(tmp_path)
    end, as_of = dt.date(2026, 1, 6), dt.datetime(2026, 1, 7, tzinfo=dt.UTC)
    run_after = dt.datetime(2026, 1, 7, 2, tzinfo=dt.UTC)
    landing = str(tmp_path / "home" / "landing")
    # what a scheduled run's step is, by the jobs' own declarations (the run's data
    # interval and batch id are the run's)
    declared = {
        "s3tm_ingest.ingest": IngestConfig(landing=landing, batch_id=20260107020000),
        "s3tm_ingest.normalise": NormaliseConfig(),
        "s3tm_remap.graph": GraphConfig(window_days=SCHEDULED_WINDOW_DAYS, end=end),
        "s3tm_remap.learn": dataclasses.replace(scheduled_learn(), end=end, as_of=as_of),
    }
    types = {
        "ingest": IngestConfig,
        "normalise": NormaliseConfig,
        "graph": GraphConfig,
        "learn": LearnConfig,
    }
    for name, expected in declared.items():
        task = tasks[name]
        params = task["params"]
        window = {"days": params.get("window_days"), "end": end, "as_of": as_of.isoformat()}
        context = {
            "params": params,
            "ti": SimpleNamespace(xcom_pull=lambda task_ids, window=window: window),
            "dag_run": SimpleNamespace(run_after=run_after),
        }
        argv = [jinja2.Template(a).render(**context) for a in task["args"]]
        assert argv[:2] == ["--lakehouse", params["lakehouse"]]
        job = Path(task["application"]).stem
        parsed, session = parse_job(types[job], argv, prog=job, description="")
        assert session.lakehouse == params["lakehouse"]
        assert parsed == expected, name
