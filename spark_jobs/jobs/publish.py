"""routing: validate, publish, roll back and list routing versions.

``publish`` makes a validated (or, with ``--skip-validation``, candidate) version the one
published version and retires the previous one, in ONE Delta commit on
``routing.versions``. With ``--margin m`` it publishes only if the candidate's throughput
is at least (1 + m) x the published version's on the same held-out posts (as ``evaluate``
recorded), and otherwise keeps the current version and says why. Throughput is the
stream's, as its cost model predicts it on a cluster with a core per matcher
(``core.stream.costs``: per post, per routed copy, per lookup and match on the busiest
matcher, per match dispatched), when both versions could be replayed with the
subscriptions; else counted work (posts / the busiest matcher's lookups plus matches);
else the posts-only model (|P| / max load). Under a margin, a candidate learned on a window
that ends before the published version's (a backfill, a re-run of a past interval) is
recorded but never published over it.
``rollback VERSION`` publishes an older version again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypedDict

import tyro

from core.errors import InputDataError, InvalidArgumentError
from spark_jobs import failpoints
from spark_jobs.common import exit_process, job_main
from spark_jobs.lake.routing_store import (
    PublishGate,
    get_version,
    latest_with_status,
    now_utc,
    publish_gate,
    published_version,
    update_versions,
    versions,
    window_end,
)

if TYPE_CHECKING:
    from schemas.rows import VersionChanges, VersionParams, VersionRow
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.delta_store import DeltaStore
    from spark_jobs.lake.validation import ValidationResult


def validate_version(lakehouse: Lakehouse, version: int) -> ValidationResult:
    """Validate a version with the expectation suites (``spark_jobs.lake.validation``)."""
    from spark_jobs.lake.validation import validate_with_expectations

    return validate_with_expectations(lakehouse, version)


class PublishDecision(TypedDict, total=False):
    """What a publish did: the published version after it and whether it changed; a kept
    version says why (``reason``), which ``candidate`` it kept out and on which ``basis``
    (counted work or the model); a switch names the version it ``retired``."""

    published: int | None
    changed: bool
    reason: str
    candidate: int
    basis: str
    retired: int | None


def publish(
    lakehouse: Lakehouse,
    version: int | None,
    *,
    margin: float | None = None,
    skip_validation: bool = False,
) -> PublishDecision:
    """Publish a version atomically; returns what happened (published or kept, and why).

    The decision and the commit hold the ``routing.versions`` lock: two publishes at once
    see each other's result, never a stale published version."""
    with lakehouse.locked("routing.versions"):
        return _publish(lakehouse, version, margin=margin, skip_validation=skip_validation)


def _publish(
    lakehouse: Lakehouse,
    version: int | None,
    *,
    margin: float | None,
    skip_validation: bool,
) -> PublishDecision:
    chosen = version
    if chosen is None:
        chosen = latest_with_status(lakehouse, "validated")
        if chosen is None and skip_validation:
            chosen = latest_with_status(lakehouse, "candidate")
    if chosen is None:
        raise InputDataError("no validated routing version to publish")
    meta = get_version(lakehouse, chosen)
    allowed = {"validated", "retired", "published"} | ({"candidate"} if skip_validation else set())
    if meta["status"] not in allowed:
        raise InvalidArgumentError(
            f"version {chosen} is {meta['status']}; only {sorted(allowed)} can be published"
        )
    current = published_version(lakehouse)
    if current == chosen:
        return {"published": chosen, "changed": False, "reason": "already published"}
    metrics = json.loads(meta["metrics"] or "{}")
    older = _older_window(meta, get_version(lakehouse, current)) if current is not None else None
    if margin is not None and older is not None:
        # a backfill or a re-run of a past interval records its version, and leaves the one
        # learned on later days in force (an operator may still publish it by number)
        return {"published": current, "changed": False, "candidate": chosen, "reason": older}
    if margin is not None:
        kept = _gate(metrics.get("evaluation", {}), chosen, current, margin)
        if kept is not None:
            decision, verdict = kept
            # recorded: routing list says why, and the stream routes by hash on its word
            metrics["publish_gate"] = verdict
            update_versions(lakehouse, {chosen: {"metrics": json.dumps(metrics)}})
            return decision
    now = now_utc()
    changes: dict[int, VersionChanges] = {
        chosen: {"status": "published", "published_at": now, "retired_at": None}
    }
    if metrics.pop("publish_gate", None) is not None:  # an earlier verdict no longer holds
        changes[chosen]["metrics"] = json.dumps(metrics)
    if current is not None:
        changes[current] = {"status": "retired", "retired_at": now}
    failpoints.crash("publish:before-commit")
    update_versions(lakehouse, changes)
    return {"published": chosen, "changed": True, "retired": current}


def _older_window(candidate: VersionRow, current: VersionRow) -> str | None:
    """Why ``candidate`` must not replace ``current``: it was learned on a window that ends
    before the published version's; else None (either end unrecorded: no verdict)."""
    candidate_end, current_end = window_end(candidate), window_end(current)
    if candidate_end is None or current_end is None or candidate_end >= current_end:
        return None
    return (
        f"candidate was learned on days up to {candidate_end}, before the published "
        f"version's ({current_end}): a past interval's version never replaces a newer one"
    )


def _gate(
    evaluation: dict[str, Any], chosen: int, current: int | None, margin: float
) -> tuple[PublishDecision, PublishGate] | None:
    """The margin's verdict: None when ``chosen`` may be published, else the decision that
    keeps it out and the verdict to record. The floor is hash routing: with no version
    published, the candidate faces hash (which the stream routes by meanwhile) with the
    same margin and basis as it would face a published version."""
    against: Literal["published", "hash"] = "published" if current is not None else "hash"
    # the stream's predicted posts/s first (it prices copies as well as the busiest
    # matcher), then counted work, then the posts-only model: the best basis evaluated
    basis, gain = "stream model", evaluation.get(f"relative_stream_throughput_vs_{against}")
    if gain is None:
        basis, gain = "counted work", evaluation.get(f"relative_work_throughput_vs_{against}")
    if gain is None:
        basis, gain = "model", evaluation.get(f"relative_model_throughput_vs_{against}")
    if gain is None:
        what = f"the published version {current}" if current is not None else "hash routing"
        raise InputDataError(
            f"version {chosen} was not evaluated against {what}: run evaluate first"
        )
    if gain >= 1.0 + margin:
        return None
    verdict: PublishGate = {
        "against": against,
        "basis": basis,
        "gain": round(float(gain), 4),
        "required": round(1.0 + margin, 4),
        "decided_at": now_utc().isoformat(),
    }
    return {
        "published": current,
        "changed": False,
        "candidate": chosen,
        "basis": basis,
        "reason": gate_sentence(verdict),
    }, verdict


def gate_sentence(verdict: PublishGate) -> str:
    """Why the gate kept a candidate out, in one sentence (no full stop)."""
    against = "hash routing" if verdict["against"] == "hash" else "the published version"
    then = "; the stream routes by hash" if verdict["against"] == "hash" else ""
    return (
        f"candidate throughput ({verdict['basis']}) x{verdict['gain']:.3f} of {against} "
        f"is below the required x{verdict['required']:.3f}{then}"
    )


@dataclass(frozen=True)
class RoutingList:
    """versions, status and throughput vs hash"""

    # read from the driver-side tables through delta-rs: no JVM, an answer in a second
    needs_spark: ClassVar[bool] = False
    details: bool = False
    """also spread, imbalance, and the posts-only model and timed replay figures"""


@dataclass(frozen=True)
class RoutingValidate:
    """structural validation of a version"""

    version: int | None = None
    """routing version (default: the latest candidate)"""


@dataclass(frozen=True)
class RoutingPublish:
    """publish a validated version"""

    version: int | None = None
    """routing version (default: the latest candidate)"""
    margin: float | None = None
    """required gain over the published version (default: the gate's)"""
    skip_validation: bool = False
    """publish without the expectation suites (tests, emergencies)"""


@dataclass(frozen=True)
class RoutingRollback:
    """publish an older version again"""

    version: tyro.conf.Positional[int]
    """the older routing version to publish again"""


# ``s3tm routing list|validate|publish|rollback ...``
RoutingCommand = (
    Annotated[RoutingList, tyro.conf.subcommand("list")]
    | Annotated[RoutingValidate, tyro.conf.subcommand("validate")]
    | Annotated[RoutingPublish, tyro.conf.subcommand("publish")]
    | Annotated[RoutingRollback, tyro.conf.subcommand("rollback")]
)


def render_versions(lakehouse: DeltaStore, *, details: bool = False) -> str:
    """The versions as a table. The headline is each version's predicted stream speed-up
    against hash routing (the stream's cost model on the held-out posts at evaluation: the
    measure the publish gate decides by), with counted matcher work (index lookups +
    matches) beside it. ``details`` adds spread, imbalance, the posts-only model and the
    timed replay."""
    from core.formatting import format_table

    def figure(value: object, missing: str) -> object:
        """A figure, or what is missing in words (a table shows no ``nan``)."""
        return value if isinstance(value, int | float) and value == value else missing

    rows = []
    every = versions(lakehouse)
    for v in every:
        evaluation = json.loads(v["metrics"] or "{}").get("evaluation", {})
        model = evaluation.get("candidate", {}).get("model", {})
        params: VersionParams = json.loads(v["params"])
        model_ratio = evaluation.get("relative_model_throughput_vs_hash")
        if not evaluation:
            work: object = "not evaluated"
        elif isinstance(model_ratio, int | float):
            work = f"no subscriptions: the model's x{model_ratio:.2f}"
        else:
            work = "no subscriptions"
        headline = [
            v["routing_version"],
            params.get("label", v["algorithm"]),
            v["n_matchers"],
            v["status"],
            figure(evaluation.get("relative_stream_throughput_vs_hash"), str(work)),
            figure(evaluation.get("relative_work_throughput_vs_hash"), str(work)),
        ]
        extra = [
            figure(model.get("spread"), "-"),
            figure(model.get("imbalance"), "-"),
            figure(model_ratio, "-"),
            figure(evaluation.get("relative_replay_throughput_vs_hash"), "-"),
        ]
        rows.append(
            [*headline, *(extra if details else []), v["created_at"].strftime("%Y-%m-%d %H:%M")]
        )
    header = ["version", "algorithm", "N", "status", "x hash (stream)", "x hash (matcher work)"]
    if details:
        header += ["spread", "imbalance", "x hash (model)", "x hash (replay)"]
    table = format_table([*header, "created"], rows)
    kept = kept_out_sentence(every)
    return f"{table}\n{kept}" if kept else table


def kept_out_sentence(rows: Sequence[VersionRow]) -> str | None:
    """One sentence when the newest of the versions ``rows`` the gate judged (newer than
    the published one) was kept out: which, and why; None otherwise."""
    live = max((r["routing_version"] for r in rows if r["status"] == "published"), default=0)
    judged = [
        (r["routing_version"], verdict)
        for r in rows
        if r["routing_version"] > live and (verdict := publish_gate(r)) is not None
    ]
    if not judged:
        return None
    version, verdict = judged[-1]
    return f"Version {version} was kept out by the publish gate: {gate_sentence(verdict)}."


def run(
    command: RoutingList | RoutingValidate | RoutingPublish | RoutingRollback,
    lakehouse: Lakehouse,
) -> int:
    if isinstance(command, RoutingList):
        print(render_versions(lakehouse, details=command.details))
    elif isinstance(command, RoutingValidate):
        chosen = command.version or latest_with_status(lakehouse, "candidate")
        if chosen is None:
            raise InputDataError("no candidate version to validate")
        result = validate_version(lakehouse, chosen)
        print(json.dumps({"routing_version": chosen, **result}))
        return 0 if result["success"] else 1
    elif isinstance(command, RoutingPublish):
        print(
            json.dumps(
                publish(
                    lakehouse,
                    command.version,
                    margin=command.margin,
                    skip_validation=command.skip_validation,
                )
            )
        )
    else:
        print(json.dumps(publish(lakehouse, command.version)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return job_main("routing", __doc__ or "", RoutingCommand, run, argv)


if __name__ == "__main__":
    exit_process(main())
