"""The Python steps of the remap DAG (no Spark session needed: small Delta tables are read
and written with delta-rs on the worker)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import TYPE_CHECKING, Any, TypedDict

from core.errors import S3TMError
from s3tm.orchestration.reports import charts as report_charts
from s3tm.orchestration.reports import store as reports
from s3tm.orchestration.reports.text import decision_sentence, evaluation_table
from spark_jobs.lake.delta_io import Lakehouse

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from schemas.rows import VersionParams, VersionRow
    from spark_jobs.jobs.publish import PublishDecision


class ValidationFailed(S3TMError):
    """The candidate failed its expectation suites: the run stops before publish."""


def _lakehouse(root: str) -> Lakehouse:
    return Lakehouse(None, root, engine="rs")


def has_learning_input(root: str) -> bool:
    """Whether ``silver.posts`` holds posts to learn on (from the Delta log, no scan)."""
    return _lakehouse(root).row_count("silver.posts") > 0


class ValidatedCandidate(TypedDict):
    """The validate task's XCom: the version it validated and where its Data Docs are."""

    routing_version: int
    data_docs: str


def validate_candidate(root: str) -> ValidatedCandidate:
    """Validate the latest candidate; raise (failing the task) when a suite fails."""
    from spark_jobs.lake.routing_store import latest_with_status
    from spark_jobs.lake.validation import validate_with_expectations

    lakehouse = _lakehouse(root)
    version = latest_with_status(lakehouse, "candidate")
    if version is None:
        raise ValidationFailed("no candidate routing version to validate")
    result = validate_with_expectations(lakehouse, version)
    if not result["success"]:
        failed = [s["suite"] for s in result["suites"] if not s["success"]]
        raise ValidationFailed(
            f"version {version} failed suites {failed}; see {result['data_docs']}"
        )
    return {"routing_version": version, "data_docs": result["data_docs"]}


def publish_if_better(root: str, margin: float) -> PublishDecision:
    """Publish the validated candidate when it beats the published version by ``margin``."""
    from spark_jobs.jobs.publish import publish

    return publish(_lakehouse(root), None, margin=margin)


def _request_extras(events: Any) -> list[dict[str, Any]]:
    extras = []
    for asset_events in (events or {}).values():
        for event in asset_events:
            extras.append(getattr(event, "extra", None) or {})
    return extras


def learning_window_days(window_days: int, events: Any) -> int:
    """The run's learning window: the shortest a triggering monitor request asks for
    (``extra["remap_conf"]["window_days"]``), else ``window_days``."""
    asked = [
        int(extra["remap_conf"]["window_days"])
        for extra in _request_extras(events)
        if isinstance(extra.get("remap_conf"), dict) and "window_days" in extra["remap_conf"]
    ]
    return min(asked) if asked else window_days


class LearningWindow(TypedDict):
    """The learning_window task's XCom, as the graph and learn jobs' options take it: the
    window's days, its last day and the time the run learns as of ("None": the newest data
    and now)."""

    days: int
    end: str
    as_of: str


# runs that stand for their data interval: the nightly schedule's, and a backfill's
BOUND_RUN_TYPES = frozenset({"scheduled", "backfill"})


def learning_window(
    window_days: int, events: Any, run_type: str | None, interval_end: dt.datetime | None
) -> LearningWindow:
    """The run's learning window. A scheduled or backfill run learns on the days before its
    data interval ends (the last full day, and the live hot words as of the interval's end):
    re-running it, or backfilling a past day, learns from that day's data, not today's. A
    Trigger or a monitor request learns on the newest data."""
    days = learning_window_days(window_days, events)
    run_type = getattr(run_type, "value", run_type)  # Airflow's DagRunType, or its value
    if run_type not in BOUND_RUN_TYPES or interval_end is None:
        return {"days": days, "end": "None", "as_of": "None"}
    last_full_day = interval_end.astimezone(dt.UTC).date() - dt.timedelta(days=1)
    return {
        "days": days,
        "end": last_full_day.isoformat(),
        "as_of": interval_end.astimezone(dt.UTC).isoformat(),
    }


def stale_request_reason(events: Any, in_force: int | None) -> str | None:
    """Why the monitor requests that triggered a run no longer hold, or None (they hold, or
    nothing requested the run: a nightly or manual run is never stale).

    Each request names the routing the monitor checked (``extra["routing_version"]``: a
    version, hash routing's ``-N``, or None when nothing was in force). Once other routing
    is in force, a condition seen on the old one (no version, its throughput dropped, a
    word burst past it) says nothing about the live one: the run queued behind the remap
    that put it in force learns nothing, and the monitor's next check asks again if the
    condition holds on the new routing. A request
    without the key (an event from before it was recorded) is honoured."""
    extras = _request_extras(events)
    if not extras or any("routing_version" not in extra for extra in extras):
        return None
    from spark_jobs.lake.routing_store import routing_label

    checked = [extra["routing_version"] for extra in extras]
    if in_force in checked:
        return None
    seen = " and ".join(sorted({routing_label(v) for v in checked}))
    return (
        f"monitor's request is stale: it checked {seen}, and {routing_label(in_force)} is "
        "in force now; its next check asks again if the condition still holds"
    )


def stale_request(root: str, events: Any) -> str | None:
    """:func:`stale_request_reason` against the routing in force (the published version,
    or hash routing while the gate keeps candidates out)."""
    from spark_jobs.lake.routing_store import routing_in_force

    return stale_request_reason(events, routing_in_force(_lakehouse(root)))


def remap_triggers(events: Any) -> list[str]:
    """What asked for this run: the conditions carried by the ``remap_request`` events
    that triggered it (``triggering_asset_events``); empty for a scheduled or manual run."""
    if not events:
        return []
    found: list[str] = []
    for asset_events in events.values():
        for event in asset_events:
            extra = getattr(event, "extra", None) or {}
            for condition in extra.get("conditions", []):
                source = getattr(event, "source_run_id", None)
                found.append(f"{condition}" + (f" (s3tm_monitor run {source})" if source else ""))
    return found


def remap_lines(latest: VersionRow | None, metrics: dict[str, Any]) -> list[str]:
    """What the latest candidate's learn step chose (incremental or full, why) and how
    many subscriptions its placement moved."""
    if latest is None:
        return ["- no routing version yet"]
    params: VersionParams = json.loads(latest["params"] or "{}")
    placement = metrics.get("placement", {})
    lines = [
        f"- version {latest['routing_version']}: {params.get('remap', 'full')} remap "
        f"({params.get('remap_reason', 'not recorded')})"
    ]
    if "moved_tokens" in params:
        lines.append(
            f"- incremental from version {params['from_version']}: {params['moved_tokens']} "
            f"tokens moved, {params['moved_subscription_words']} of "
            f"{params['move_budget']} subscription words allowed; training throughput "
            f"{params['incremental_training_throughput']} incremental vs "
            f"{params['full_training_throughput']} full"
        )
        if "full_judged_throughput" in params:  # versions learned since 2026-11-25
            lines.append(
                f"- judged on {params['judged_posts']} {params['remap_judged_on']}: "
                f"throughput {params['incremental_judged_throughput']} incremental vs "
                f"{params['full_judged_throughput']} full"
            )
    if placement.get("previous_version") is not None:
        lines.append(
            f"- placement: {placement['moved_subscriptions']} of "
            f"{placement['subscriptions']} subscriptions moved from version "
            f"{placement['previous_version']}'s"
        )
    return lines


def _published_row(rows: list[VersionRow]) -> VersionRow | None:
    """The live version's row (``rows`` oldest first), None before the first publish."""
    return next((r for r in reversed(rows) if r["status"] == "published"), None)


def headline(rows: list[VersionRow]) -> str:
    """The report's first line: the published version against hash routing, by the
    stream's predicted speed-up (the gate's measure) with matcher work beside it, or why
    there is none."""
    live = _published_row(rows)
    if live is None:
        return "No version is published."
    evaluation = json.loads(live["metrics"] or "{}").get("evaluation", {})
    stream = evaluation.get("relative_stream_throughput_vs_hash")
    work = evaluation.get("relative_work_throughput_vs_hash")
    version = live["routing_version"]
    if stream is not None and work is not None:
        return (
            f"Published: version {version}, the stream x{stream:.2f} of hash routing "
            f"(predicted), x{work:.2f} by matcher work."
        )
    if work is not None:
        return f"Published: version {version}, x{work:.2f} of hash routing, by matcher work."
    model = evaluation.get("relative_model_throughput_vs_hash")
    if model is None:
        return f"Published: version {version}, not evaluated."
    return (
        f"Published: version {version}, x{model:.2f} of hash routing by the posts-only model "
        "(no subscriptions to count matcher work with)."
    )


def write_report(
    root: str, run_id: str, outcome: dict[str, Any] | None, *, triggering_events: Any = None
) -> str:
    """Write the run report (why it ran, versions, metrics, decision) as Markdown under the
    lakehouse; ``outcome`` is the publish step's, None when the run stopped before it;
    ``triggering_events`` the monitor requests that asked for the run (the run's
    ``triggering_asset_events``; None for a nightly or manual run)."""
    from spark_jobs.jobs.publish import render_versions
    from spark_jobs.lake.routing_store import versions
    from spark_jobs.lake.validation import data_docs_location

    lakehouse = _lakehouse(root)
    rows = versions(lakehouse)
    if outcome is None:
        live_row = _published_row(rows)
        live = live_row["routing_version"] if live_row else None
        stale = stale_request_reason(triggering_events, live)
        if stale is not None:
            reason = stale
        elif has_learning_input(root):
            reason = "run failed before publish (see the failed task's log)"
        else:
            reason = "skipped: silver.posts is empty (run s3tm_ingest first)"
        outcome = {"published": live, "reason": reason}
    latest = rows[-1] if rows else None
    metrics = json.loads(latest["metrics"] or "{}") if latest else {}
    evaluation = metrics.get("evaluation", {})
    lines = [
        f"# s3tm_remap run {run_id}",
        "",
        headline(rows),
        "",
        "## Why it ran",
        "",
        *(
            [f"- requested by s3tm_monitor: {t}" for t in triggers]
            if (triggers := remap_triggers(triggering_events))
            else ["- the nightly schedule (or a manual trigger): no monitor request"]
        ),
        "",
        f"Decision: {decision_sentence(outcome)}",
        "",
        "## Remap",
        "",
        *remap_lines(latest, metrics),
        "",
        "## Routing versions",
        "",
        "```",
        render_versions(lakehouse),
        "```",
        "",
        "## Evaluation of the latest candidate",
        "",
        *evaluation_table(evaluation),
        "",
        f"Data Docs: {data_docs_location(lakehouse)}",
        "",
    ]
    path = reports.write_report(root, "remap", run_id, lines)
    work = {
        name: evaluation[key]["matcher_work"]
        for name, key in (("published", "published"), ("candidate", "candidate"))
        if isinstance(evaluation.get(key), dict) and evaluation[key].get("matcher_work")
    }
    pictures = reports.write_report(
        root,
        "remap",
        run_id,
        [
            report_charts.report_html(
                f"s3tm_remap run {run_id}",
                lines,
                [report_charts.work_per_matcher(work), report_charts.throughput_by_version(rows)],
            )
        ],
        suffix=".html",
    )
    log.info("run report: %s (with pictures: %s)", path, pictures)
    return str(path)
