"""The platform's environment settings, declared once: every ``S3TM_*`` variable the code
reads, with its type, default and meaning (docs/OPERATIONS.md's table is checked against
this class). Read when asked for, ``settings()``, never at import: a test or a task that
sets a variable sees it on its next call.

pydantic-settings does the reading: types (an ``S3TM_MATCHERS=abc`` is refused with the
variable's name), empty values read as unset, and the variable names derived from the
field names, so none is spelled twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.errors import InvalidArgumentError

PREFIX = "S3TM_"
REPO = Path(__file__).resolve().parents[1]


class PlatformSettings(BaseSettings):
    """``S3TM_<FIELD>`` for each field (``lakehouse``: ``S3TM_LAKEHOUSE``)."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, env_ignore_empty=True, frozen=True, extra="ignore"
    )

    # -- where the data is ----------------------------------------------------------------
    lakehouse: str = Field(
        default="lakehouse",
        description="the lakehouse root of every command, job and DAG: a path (a relative "
        "one from the directory the command or the DAG file is read in), `s3://` or `s3a://`",
    )
    landing: str | None = Field(
        default=None,
        description="where `s3tm_ingest` finds JSON-lines files (a path or `s3://`; unset: "
        "`<repo>/landing`)",
    )
    catalog_uri: str | None = Field(
        default=None,
        description="a Hive Metastore (`thrift://host:9083`) in which every Spark job "
        "registers the lakehouse's tables, so Spark SQL, Trino or a BI tool find them by "
        "name (`routing.versions`); unset: tables by path only",
    )
    posts_source: Literal["files", "kafka"] = Field(
        default="files",
        description="where `s3tm_ingest` reads posts: `files` (`S3TM_LANDING`) or `kafka`",
    )
    shared_data: Path | None = Field(
        default=None,
        description="where benchmarks find the real tweets (unset: `../shared/data`)",
    )
    state_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "s3tm",
        description="local state of an object-store lakehouse (Great Expectations, lock "
        "client, SQL server)",
    )
    s3_conditional_put: str = Field(
        default="etag",
        description="delta-rs' conditional puts on S3 (`etag`; a store without them needs "
        "another lock)",
    )
    # -- the deployment -------------------------------------------------------------------
    matchers: int = Field(
        default=16,
        ge=1,
        description="N matchers: the remap DAG's default `nodes` (the topic's partitions on "
        "Kubernetes)",
    )
    task_retries: int = Field(default=2, ge=0, description="the DAGs' task retries")
    # the slowest step measured is the remap's evaluate at 10M topic-based subscriptions,
    # 18 minutes (docs/RESULTS.md): a task past an hour is hung, not slow
    task_timeout_minutes: float = Field(
        default=60.0,
        gt=0,
        description="every DAG task's `execution_timeout`: a task running longer is "
        "stopped (its Spark job killed) and retried or failed",
    )
    # each try of each step of the nightly chain at its timeout, with room: a run past it
    # holds the DAG's one run slot (max_active_runs=1) and is failed
    run_timeout_minutes: float = Field(
        default=240.0,
        gt=0,
        description="every DAG run's `dagrun_timeout` (a DAG scheduled more often than "
        "that: its period)",
    )
    alert_email: str | None = Field(
        default=None,
        description="where a failed or retried task is reported (comma-separated addresses, "
        "sent through the `smtp_default` connection; unset: no mail)",
    )
    image: str | None = Field(
        default=None,
        description="on Kubernetes, the image of the Spark pods the DAG tasks submit",
    )
    spark_application_scheme: str = Field(
        default="",
        description="`local`: job files as `local://` URIs inside the image (cluster deploy mode)",
    )
    # -- Spark and Delta ------------------------------------------------------------------
    spark_master: str | None = Field(
        default=None,
        description="the Spark master of a command run outside spark-submit (unset: `local[*]`)",
    )
    spark_log_level: str = Field(default="WARN", description="the Spark context's log level")
    spark_ui: bool = Field(
        default=False, description="turns Spark's UI (and its Prometheus servlets) on"
    )
    driver_memory: str = Field(default="4g", description="a local session's driver memory")
    # the delta-rs bridge by default: the faster of the two on the remap chain (`s3tm bench
    # delta-engines`: 0.78x delta-spark's time at 200k posts, 0.88x at 1M)
    delta_engine: Literal["rs", "spark"] = Field(
        default="rs",
        description="the Delta engine of the jobs' writes: `rs` (delta-rs) or `spark` "
        "(delta-spark)",
    )
    jars_dir: Path = Field(
        default=REPO / ".jars", description="where `make setup` wrote the JVM classpath files"
    )
    web_assets_dir: Path = Field(
        default=REPO / ".web" / "data-docs",
        description="the Data Docs' static assets `make setup` fetched (the image sets its own)",
    )
    # -- the stream -----------------------------------------------------------------------
    matcher_index: Literal["predicate", "trie"] = Field(
        default="predicate",
        description="the stream's matcher index: `predicate` (access predicates) or `trie`",
    )
    kafka_dir: Path = Field(default=Path(".kafka"), description="`s3tm kafka`'s broker folder")
    kafka_options: dict[str, str] = Field(
        default_factory=dict,
        description="Kafka client settings for the stream's and the ingest's Spark readers, "
        'a JSON object (`{"client.id": "s3tm", "fetch.max.bytes": "52428800"}`): each '
        "becomes Spark's `kafka.<setting>`",
    )
    # -- failure injection (tests) --------------------------------------------------------
    crash: str | None = Field(
        default=None,
        description="the crash tests' kill point (`spark_jobs/failpoints.py`)",
    )
    stream_driver_pid: int | None = Field(
        default=None,
        description="the crash tests: the stream driver a kill point signals",
    )


def env_name(field: str) -> str:
    """The variable of a field: ``env_name("lakehouse") == "S3TM_LAKEHOUSE"``."""
    if field not in PlatformSettings.model_fields:
        raise InvalidArgumentError(f"no setting {field!r}")
    return PREFIX + field.upper()


def settings() -> PlatformSettings:
    """The environment's settings now.

    Raises:
        InvalidArgumentError: a variable with a value its type refuses (named).
    """
    try:
        return PlatformSettings()
    except ValidationError as error:
        problems = "; ".join(
            f"{env_name(str(e['loc'][0]))}: {e['msg']}" for e in error.errors() if e["loc"]
        )
        raise InvalidArgumentError(problems or str(error)) from None


def shown_default(field: str) -> str:
    """A field's default as the docs' table shows it: paths in the checkout relative to it,
    the home folder as ``~``, an unset one as ``(none)``."""
    info = PlatformSettings.model_fields[field]
    value = info.get_default(call_default_factory=True)
    if value is None or value == "":
        return "(none)"
    if isinstance(value, Path):
        home = Path.home()
        if value.is_relative_to(REPO):
            return f"`{value.relative_to(REPO)}`"
        if value.is_relative_to(home):
            return f"`~/{value.relative_to(home)}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def settings_table() -> str:
    """The settings as docs/OPERATIONS.md's table shows them (a test compares the two)."""
    rows = ["| variable | default | what it sets |", "|---|---|---|"]
    for field, info in PlatformSettings.model_fields.items():
        rows.append(f"| `{env_name(field)}` | {shown_default(field)} | {info.description} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(settings_table(), end="")
