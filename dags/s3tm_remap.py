"""
## s3tm_remap

Schedule: `0 2 * * *` (UTC, nightly backstop), the `remap_request` asset, or Trigger.
`s3tm_monitor` emits `remap_request` when the live routing stops paying or a new hot word
appears (the run report says which); a request made on a version that is no longer the
published one (a remap published another since) skips the run. Re-learns the word ->
matcher routing. A new DAG's first nightly run is the next 02:00, not one before it: a
catch-up run would take the DAG's one run slot ahead of a Trigger, and the monitor asks for
a remap when one pays.

graph (learning window) -> learn (by default an incremental salb2 remap of the published
version, moving at most `max_moved` of the subscriptions; a full salb2 remap when there is
none, N changed, or a full one gains more than `full_remap_gain`) -> place (LASP; the
subscriptions whose matcher stays eligible stay put) ->
validate (Great Expectations; a failed suite stops the run before publish) -> evaluate on
the held-out posts against the published version and hash -> publish only if validation
passed AND the candidate beats the published version by `margin` (with none published:
hash routing, the floor) by counted matcher work (lookups and matches, in the replay when
there are subscriptions, else by the model); else the current routing stays (the published
version, or hash routing, which the stream routes by until a candidate beats it), and the
report says why -> run report.

The window: a nightly run (and each run of an `airflow backfill`) learns on the `window_days`
full days before its data interval ends, so re-running it, or backfilling a past day,
learns from that day's data and records a version for it; publish never puts a version
learned on older days over a newer one. A Trigger or a monitor request learns on the newest
days.

Params: `nodes` (N), `algorithm`, `split`, `incremental`, `max_moved`, `full_remap_gain`,
`window_days` (a monitor request may ask for a shorter window: the run then learns on the
recent days only), `margin`, `cooccurrence` (off: gold.cooccurrence is for SQL users only),
`lakehouse`. The run report says which remap ran and how many
subscriptions moved.
Reports: `<lakehouse>/reports/`; Data Docs: `<lakehouse>/_quality/gx/uncommitted/data_docs/`.
"""

from __future__ import annotations

from airflow.sdk import Param, dag, task

from core.remap_options import ALGORITHMS, DEFAULT_MARGIN
from s3tm.orchestration.dag_support import (
    dag_defaults,
    spark_job,
)
from schemas.assets import signal
from spark_jobs.jobs.configs import GraphConfig, LearnConfig, scheduled_learn
from spark_jobs.options import Template, job_argv

# the learning window this run uses: the `learning_window` task's result
WINDOW = "ti.xcom_pull(task_ids='learning_window')['%s']"
WINDOW_DAYS, WINDOW_END, AS_OF = (Template(WINDOW % key) for key in ("days", "end", "as_of"))


# the deployment's settings when the file is parsed
DEFAULTS = dag_defaults()
# the learn step's options with the params' defaults (a scheduled remap's: the job's
# own defaults are a command-line run's, spark_jobs.jobs.configs says why they differ)
LEARN = scheduled_learn()
# a version's tables: what learn, place, validate and evaluate read of the routing
ROUTING = ("routing.versions", "routing.mappings")
SCHEDULE = "0 2 * * *"


@dag(
    dag_id="s3tm_remap",
    **DEFAULTS.dag_arguments(SCHEDULE, assets=[signal("remap_request")]),
    tags=["s3tm", "remap", "spark", "routing"],
    doc_md=__doc__,
    params={
        "nodes": Param(
            LEARN.nodes,
            type="integer",
            minimum=1,
            description="matchers N (default: the deployment's S3TM_MATCHERS)",
        ),
        "algorithm": Param(
            LEARN.algorithm,
            enum=list(ALGORITHMS),
            description="learner: salb2 (SALB or METIS, then restreaming; splits) or a baseline",
        ),
        "split": Param(LEARN.split, type="boolean", description="split hot words"),
        "incremental": Param(
            LEARN.incremental,
            type="boolean",
            description="refine the published version (salb2), moving few subscriptions; "
            "a full remap when it gains more than full_remap_gain",
        ),
        "max_moved": Param(
            LEARN.max_moved,
            type="number",
            minimum=0,
            maximum=1,
            description="incremental: the most subscriptions (fraction) a remap re-places",
        ),
        "full_remap_gain": Param(
            LEARN.full_remap_gain,
            type="number",
            minimum=0,
            description="incremental: learn from scratch when that gains more than this",
        ),
        "window_days": Param(
            LEARN.window_days,
            type="integer",
            minimum=0,
            description="learn on the last N days of data (0: all)",
        ),
        "margin": Param(
            DEFAULT_MARGIN,
            type="number",
            minimum=0,
            description="required gain over the published version (over hash when none is)",
        ),
        "cooccurrence": Param(
            GraphConfig.cooccurrence,
            type="boolean",
            description="also write gold.cooccurrence (word pairs per day, for SQL users: no "
            "learner reads it, and on a day's sample it is the slowest step)",
        ),
        "lakehouse": Param(DEFAULTS.lakehouse, type="string"),
    },
)
def s3tm_remap() -> None:
    graph = spark_job(
        "graph",
        "graph",
        job_argv(
            GraphConfig,
            window_days=WINDOW_DAYS,
            end=WINDOW_END,
            cooccurrence=Template("params.cooccurrence"),
        ),
        inlets=DEFAULTS.tables("silver.posts"),
        outlets=DEFAULTS.tables("gold.post_words", "gold.word_stats"),
    )
    learn = spark_job(
        "learn",
        "learn",
        job_argv(
            LearnConfig,
            nodes=Template("params.nodes"),
            algorithm=Template("params.algorithm"),
            window_days=WINDOW_DAYS,
            end=WINDOW_END,
            as_of=AS_OF,
            split=Template("params.split"),
            # salb2 refines; another learner asked for learns from scratch
            incremental=Template("params.incremental and params.algorithm == 'salb2'"),
            max_moved=Template("params.max_moved"),
            full_remap_gain=Template("params.full_remap_gain"),
        ),
        inlets=DEFAULTS.tables(
            "gold.post_words", "subscriptions.registry", "stream.health", *ROUTING
        ),
        outlets=DEFAULTS.tables("routing.mappings", "routing.versions"),
    )
    place = spark_job(
        "place",
        "place",
        [],
        inlets=DEFAULTS.tables("subscriptions.registry", "routing.placements", *ROUTING),
        outlets=DEFAULTS.tables("routing.placements", "routing.versions"),
    )
    evaluate = spark_job(
        "evaluate",
        "evaluate",
        [],
        inlets=DEFAULTS.tables(
            "silver.posts", "subscriptions.registry", "routing.placements", *ROUTING
        ),
        outlets=DEFAULTS.tables("routing.versions"),
    )

    @task
    def learning_window(
        params: dict | None = None,
        triggering_asset_events: dict | None = None,
        dag_run=None,
        data_interval_end=None,
    ) -> dict:
        """Days to learn on: `window_days`, or the monitor's shorter request (after a burst
        or a drop, the recent posts are the ones that matter); a nightly or backfill run's
        end at its data interval's."""
        from s3tm.orchestration.tasks.remap import learning_window as window_of

        return window_of(
            int(params["window_days"]),
            triggering_asset_events,
            getattr(dag_run, "run_type", None),
            data_interval_end,
        )

    @task.short_circuit(
        ignore_downstream_trigger_rules=False, inlets=DEFAULTS.tables("routing.versions")
    )
    def request_holds(
        params: dict | None = None, triggering_asset_events: dict | None = None
    ) -> bool:
        """Skips the run (not fails it) when the monitor's request is stale: another version
        was published after the check that asked (the report says which)."""
        from s3tm.orchestration.tasks.remap import stale_request

        return stale_request(params["lakehouse"], triggering_asset_events) is None

    @task.short_circuit(
        ignore_downstream_trigger_rules=False, inlets=DEFAULTS.tables("silver.posts")
    )
    def has_posts(params: dict | None = None) -> bool:
        """Skips the run (not fails it) while silver.posts is empty: run s3tm_ingest first."""
        from s3tm.orchestration.tasks.remap import has_learning_input

        return has_learning_input(params["lakehouse"])

    @task(
        inlets=DEFAULTS.tables("routing.placements", "subscriptions.registry", *ROUTING),
        outlets=DEFAULTS.tables("routing.versions"),
    )
    def validate(params: dict | None = None) -> dict:
        from s3tm.orchestration.tasks.remap import validate_candidate

        return validate_candidate(params["lakehouse"])

    @task(inlets=DEFAULTS.tables("routing.versions"), outlets=DEFAULTS.tables("routing.versions"))
    def publish(params: dict | None = None) -> dict:
        from s3tm.orchestration.tasks.remap import publish_if_better

        return publish_if_better(params["lakehouse"], float(params["margin"]))

    @task(trigger_rule="all_done", inlets=DEFAULTS.tables("routing.versions"))
    def report(
        outcome: dict | None,
        params: dict | None = None,
        run_id: str | None = None,
        triggering_asset_events: dict | None = None,
    ) -> str:
        from s3tm.orchestration.tasks.remap import write_report

        return write_report(
            params["lakehouse"],
            run_id or "manual",
            outcome,
            triggering_events=triggering_asset_events,
        )

    @task
    def done() -> None:
        """Fails (upstream_failed) when any step failed, so the run is marked failed even
        though the report, which always runs, succeeded."""

    checked = validate()
    decision = publish()
    (
        learning_window()
        >> request_holds()
        >> has_posts()
        >> graph
        >> learn
        >> place
        >> checked
        >> evaluate
        >> decision
    )
    finished = done()
    report(decision) >> finished
    decision >> finished


s3tm_remap()
