"""What the DAG files share: paths, default args and the SparkSubmitOperator factory.

Cheap to import (no Spark, no core): DAG parsing must not load heavy modules or touch a
database or connection.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from spark_jobs.kafka_security import deployment_bootstrap, deployment_topic
from spark_jobs.lake.storage import normalise_root
from spark_jobs.options import Template
from spark_jobs.settings import env_name, settings

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "spark_jobs" / "jobs"
# Written by `make setup`: the resolved jars (docker/jars/pom.xml) on the classpath of the
# drivers spark-submit starts and their executors. Absent in the image, whose Spark holds
# the jars (and whose spark-defaults.conf then applies).
SPARK_PROPERTIES = REPO / ".jars" / "spark-defaults.conf"
SPARK_CONN_ID = "spark_default"


@dataclass(frozen=True)
class DagDefaults:
    """What the DAGs' Params default to, from the deployment's environment when a DAG file
    is parsed (:func:`dag_defaults`)."""

    lakehouse: str
    landing: str
    # where learning posts come from: landing files, or the posts topic (a Kafka
    # deployment: compose and Kubernetes set S3TM_POSTS_SOURCE=kafka beside
    # KAFKA_BOOTSTRAP and POSTS_TOPIC)
    posts_source: str
    kafka_bootstrap: str
    posts_topic: str
    # N matchers: the deployment says it once (compose: POSTS_PARTITIONS; Kubernetes:
    # s3tm-config), the remap DAG's `nodes` defaults to it
    matchers: int
    # every task's retries, execution_timeout and failure and retry notifiers
    default_args: dict[str, Any]
    # a run's dagrun_timeout (run_timeout_within: no longer than the DAG's period) and the
    # notifiers of a failed run (a timed-out one included)
    run_timeout: timedelta
    on_run_failure: list[Any]

    def dag_arguments(self, schedule: str, *, assets: Sequence[Any] = ()) -> dict[str, Any]:
        """What every project DAG declares alike: runs on ``schedule`` (cron, UTC; or on
        an event of one of ``assets``, whichever comes first), one run at a time, no
        catch-up, the tasks' defaults, a run timeout within the period and the failure
        notice."""
        timetable = cron_schedule(schedule)
        if assets:
            from airflow.timetables.assets import AssetOrTimeSchedule

            timetable = AssetOrTimeSchedule(timetable=timetable, assets=list(assets))
        return {
            "schedule": timetable,
            "catchup": False,
            "max_active_runs": 1,
            "default_args": self.default_args,
            "dagrun_timeout": self.run_timeout_within(cron_period(schedule)),
            "on_failure_callback": self.on_run_failure,
        }

    def tables(self, *names: str) -> list[Any]:
        """The Assets of tables ``names`` in the deployment's lakehouse: a task's inlets or
        outlets, and the datasets of its OpenLineage events."""
        from schemas.assets import asset

        return [asset(name, self.lakehouse) for name in names]

    def run_timeout_within(self, period: timedelta) -> timedelta:
        """The run timeout of a DAG scheduled every ``period``: a hung run ends before the
        next one is due (its one run slot would hold that run back)."""
        return min(self.run_timeout, period)


def notifiers(addresses: str | None) -> list[Any]:
    """Airflow's SMTP notifier to ``addresses`` (comma-separated; the `smtp_default`
    connection is the server): its mail names the DAG, the task, the run and its state and
    links the task's log. None without addresses."""
    to = [a.strip() for a in (addresses or "").split(",") if a.strip()]
    if not to:
        return []
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier

    return [SmtpNotifier(to=to)]


def dag_defaults() -> DagDefaults:
    """The DAGs' defaults now (the lakehouse every command defaults to, and the
    repository's landing folder, unless set)."""
    platform = settings()
    notify = notifiers(platform.alert_email)
    return DagDefaults(
        lakehouse=normalise_root(platform.lakehouse),
        landing=platform.landing or str(REPO / "landing"),
        posts_source=platform.posts_source,
        kafka_bootstrap=deployment_bootstrap(),
        posts_topic=deployment_topic(),
        matchers=platform.matchers,
        default_args={
            "owner": "s3tm-platform",
            "retries": platform.task_retries,
            "retry_delay": timedelta(minutes=2),
            "execution_timeout": timedelta(minutes=platform.task_timeout_minutes),
            **({"on_failure_callback": notify, "on_retry_callback": notify} if notify else {}),
        },
        run_timeout=timedelta(minutes=platform.run_timeout_minutes),
        on_run_failure=notify,
    )


# The ingest batch id of a run: its run_after time to the second. Not ``logical_date``: a
# run triggered from the UI or the REST API has none (the template then failed), and two
# manual runs in one minute must not share a batch id (the second would be skipped).
BATCH_ID = Template("dag_run.run_after.strftime('%Y%m%d%H%M%S')")


def cron_schedule(expression: str) -> Any:
    """The project DAGs' timetable: ``expression`` in UTC, whose first scheduled run is the
    slot after the DAG is created, never one before it: the demo's DAGs, started in the UI
    right after, fire nothing at once. A slot that passes while the scheduler is stopped
    runs once when it starts (``catchup=False``: the latest only). Every DAG's work is
    cumulative (ingest takes all new files, the monitor reads the last hours, the remap its
    window), so skipping slots loses nothing.

    Airflow honours ``run_immediately`` only for a DAG without ``start_date`` (so the DAGs
    have none), and ``False`` there still runs a slot missed by under a tenth of the period;
    a zero timedelta never does.
    """
    from airflow.timetables.trigger import CronTriggerTimetable

    return CronTriggerTimetable(expression, timezone="UTC", run_immediately=timedelta(0))


def cron_period(expression: str) -> timedelta:
    """The time between two runs of ``expression``: the shortest gap of its next eight."""
    from datetime import UTC, datetime

    from croniter import croniter

    fires = croniter(expression, datetime(2026, 1, 5, tzinfo=UTC))
    times = [fires.get_next(datetime) for _ in range(8)]
    return min(later - earlier for earlier, later in itertools.pairwise(times))


def application_path(job: str) -> str:
    """Where spark-submit finds ``spark_jobs/jobs/<job>.py``: this file system's path, or
    with ``S3TM_SPARK_APPLICATION_SCHEME=local`` a ``local://`` URI, the form Kubernetes
    cluster deploy mode needs for a file inside the image (set by the Helm values)."""
    path = JOBS / f"{job}.py"
    scheme = settings().spark_application_scheme
    return f"{scheme}://{path}" if scheme else str(path)


# what a Spark job's driver and executors need from the submitting pod's environment (on
# Kubernetes they start in pods of their own): the object store's endpoint and region,
# the lakehouse and its catalog
FORWARDED_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_ALLOW_HTTP",
    env_name("lakehouse"),
    # the catalog the jobs register their tables in (spark_jobs/lake/catalog.py)
    env_name("catalog_uri"),
    # Kafka's TLS and SASL settings (spark_jobs/kafka_security.py), not its credentials:
    # those reach drivers from a Secret (spark-defaults' secretKeyRef)
    "KAFKA_SECURITY_PROTOCOL",
    "KAFKA_SASL_MECHANISM",
    "KAFKA_SSL_CA_FILE",
)


def submit_conf(environ: dict[str, str] | None = None) -> dict[str, str]:
    """spark-submit settings from the environment: the image (``S3TM_IMAGE``) and the
    forwarded variables, for drivers (``spark.kubernetes.driverEnv``) and executors."""
    env = dict(os.environ if environ is None else environ)
    conf: dict[str, str] = {}
    image = env.get(env_name("image"))
    if image:
        conf["spark.kubernetes.container.image"] = image
    for name in FORWARDED_ENV:
        if env.get(name):
            conf[f"spark.kubernetes.driverEnv.{name}"] = env[name]
            conf[f"spark.executorEnv.{name}"] = env[name]
    return conf


# OpenLineage's Spark listener (its jar: docker/jars/pom.xml)
OPENLINEAGE_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"


def lineage_conf() -> dict[str, str]:
    """The Spark settings that turn OpenLineage's listener on, when Airflow's OpenLineage
    provider has a transport (``[openlineage] transport``, ``OPENLINEAGE_URL``, ...): the
    operator then adds that transport and the Airflow task as the Spark run's parent, so
    one setting sends both sides' events to one place. Nothing without a transport."""
    from airflow.providers.openlineage import conf as lineage

    if lineage.is_disabled():
        return {}
    return {
        "spark.extraListeners": OPENLINEAGE_LISTENER,
        "spark.openlineage.namespace": lineage.namespace(),
    }


def spark_job(
    task_id: str,
    job: str,
    args: Sequence[str],
    *,
    inlets: Sequence[Any] = (),
    outlets: Sequence[Any] = (),
    **kwargs: Any,
) -> Any:
    """A SparkSubmitOperator running ``spark_jobs/jobs/<job>.py`` against ``spark_default``.

    The lakehouse root comes from the DAG run's ``lakehouse`` param; executors use this
    interpreter (the one with the project installed). ``inlets`` and ``outlets``: the
    tables it reads and writes (Assets; lineage).
    """
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    lineage = lineage_conf()
    return SparkSubmitOperator(
        task_id=task_id,
        application=application_path(job),
        application_args=["--lakehouse", "{{ params.lakehouse }}", *args],
        conn_id=SPARK_CONN_ID,
        name=f"s3tm-{job}",
        env_vars={"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
        properties_file=str(SPARK_PROPERTIES) if SPARK_PROPERTIES.is_file() else None,
        conf={**submit_conf(), **lineage},
        inlets=list(inlets),
        outlets=list(outlets),
        openlineage_inject_parent_job_info=bool(lineage),
        openlineage_inject_transport_info=bool(lineage),
        **kwargs,
    )
