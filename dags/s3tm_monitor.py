"""
## s3tm_monitor

Schedule: `0 * * * *` (UTC, hourly), or Trigger. Is the published routing version still
paying? Reads the last `period_hours` of `stream.health` (written by the streaming matcher
per micro-batch) and decides:

- **remap** when the version's live posts/s as the stream's cost model predicts them
  (from the period's posts, matches and each matcher's copies and counted work: the
  measure the publish gate judges versions by) have fallen by more than `max_drop` below
  the same figure over the version's first `period_hours` of live posts (throughput by
  counted matcher work where batches lack the model's counts), when the stream's word sketch
  reports a new hot word over the split threshold, or when posts are ingested but no
  version is published. The `request_remap` task then emits the `remap_request` asset
  event (its extra carries the conditions), which triggers `s3tm_remap`; the remap run
  report says which condition fired.
- **healthy** (or **no data**): nothing else happens.

Every check is recorded in the `stream.monitor` Delta table. `s3tm_remap` keeps its nightly
schedule as a backstop.

The request asks the remap to learn on the last `recent_window_days` (1) when the version
degraded or a word burst: a week-long window would dilute what changed.

Params: `period_hours`, `max_drop`, `recent_window_days`, `lakehouse`.
"""

from __future__ import annotations

from airflow.sdk import Param, dag, task

from s3tm.orchestration.dag_support import (
    dag_defaults,
)
from schemas.assets import signal

# the deployment's settings when the file is parsed
DEFAULTS = dag_defaults()
SCHEDULE = "0 * * * *"


@dag(
    dag_id="s3tm_monitor",
    **DEFAULTS.dag_arguments(SCHEDULE),
    tags=["s3tm", "monitor", "routing"],
    doc_md=__doc__,
    params={
        "period_hours": Param(1.0, type="number", exclusiveMinimum=0, description="hours read"),
        "max_drop": Param(
            0.10,
            type="number",
            minimum=0,
            maximum=0.99,
            description="remap when live throughput by matcher work falls by more than this",
        ),
        "recent_window_days": Param(
            1,
            type="integer",
            minimum=0,
            description="the remap it asks for learns on these last days (0: the remap's own)",
        ),
        "lakehouse": Param(DEFAULTS.lakehouse, type="string"),
    },
)
def s3tm_monitor() -> None:
    @task(
        inlets=DEFAULTS.tables("stream.batches", "stream.health", "routing.versions"),
        outlets=DEFAULTS.tables("stream.monitor"),
    )
    def check(params: dict | None = None, run_id: str | None = None) -> dict:
        from s3tm.orchestration.tasks.monitor import check_routing_health

        return check_routing_health(
            params["lakehouse"],
            period_hours=float(params["period_hours"]),
            max_drop=float(params["max_drop"]),
            run_id=run_id or "manual",
        )

    @task.short_circuit
    def needs_remap(result: dict) -> bool:
        """Skips the request (a healthy version, or no data) without failing the run."""
        return bool(result["decision"] == "remap")

    @task(outlets=[signal("remap_request")])
    def request_remap(
        result: dict, params: dict | None = None, outlet_events: dict | None = None
    ) -> list[str]:
        from s3tm.orchestration.tasks.monitor import remap_request

        assert outlet_events is not None
        outlet_events[signal("remap_request")].extra = remap_request(
            result, recent_window_days=int(params["recent_window_days"])
        )
        return list(result["conditions"])

    result = check()
    needs_remap(result) >> request_remap(result)


s3tm_monitor()
