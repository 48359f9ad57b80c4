"""pipeline: the whole chain in ONE Spark session (no JVM start per job):
ingest -> normalise -> graph -> learn -> place -> evaluate -> validate -> publish.

It prints the wall time and output of every step and the total. Airflow runs the same jobs
one spark-submit each; this command is for demos, benchmarks and a single machine.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from core.formatting import format_table
from spark_jobs.common import exit_process, job_entry
from spark_jobs.jobs import evaluate, graph, ingest, learn, normalise, place, publish
from spark_jobs.jobs.configs import LearnerOptions
from spark_jobs.jobs.evaluate import EvaluateConfig
from spark_jobs.jobs.graph import GraphConfig
from spark_jobs.jobs.ingest import IngestConfig
from spark_jobs.jobs.learn import LearnConfig
from spark_jobs.jobs.normalise import NormaliseConfig
from spark_jobs.jobs.place import PlaceConfig
from spark_jobs.jobs.publish import RoutingPublish, RoutingValidate
from spark_jobs.options import config_from
from spark_jobs.runtime.peak_rss import driver_jvm_pid, peak_mib, reset_peak

if TYPE_CHECKING:
    from spark_jobs.lake.delta_io import Lakehouse

StepConfig = TypeVar(
    "StepConfig", NormaliseConfig, GraphConfig, LearnConfig, PlaceConfig, EvaluateConfig
)


@dataclass(frozen=True, kw_only=True)
class PipelineConfig(LearnerOptions):
    """The chain's options: those of ingest, normalise, graph, learn and publish."""

    landing: str
    """directory of JSON-lines files"""
    pattern: str = IngestConfig.pattern
    """file glob in --landing"""
    default_day: dt.date | None = None
    """event day of posts without created_at (default: today UTC)"""
    batch_id: int | None = None
    """the ingest batch number (default: the epoch second now)"""
    sample_rate: float = NormaliseConfig.sample_rate
    """fraction of posts kept"""
    margin: float | None = None
    """publish only when the candidate beats the published version (or hash) by this"""
    cooccurrence: bool = False
    """also write gold.cooccurrence (word pairs per day: no learner reads it; the slowest
    step at scale)"""
    seed: int = 0
    """every step's seed"""
    report: str | None = None
    """write the step table as JSON here"""


def _step(job_config: type[StepConfig], config: PipelineConfig) -> StepConfig:
    """A step's config: each of its options the chain has too (the same setting: seed,
    nodes, ...) from the chain's, the rest at the step's defaults. The ingest is spelled
    out: its sample_rate is not the chain's (normalise's)."""
    return config_from(job_config, config)


def run(config: PipelineConfig, lakehouse: Lakehouse) -> int:
    steps: list[tuple[str, Callable[[], int]]] = [
        (
            "ingest",
            lambda: ingest.run(
                IngestConfig(
                    landing=config.landing,
                    pattern=config.pattern,
                    batch_id=config.batch_id,
                    default_day=config.default_day,
                ),
                lakehouse,
            ),
        ),
        ("normalise", lambda: normalise.run(_step(NormaliseConfig, config), lakehouse)),
        ("graph", lambda: graph.run(_step(GraphConfig, config), lakehouse)),
        ("learn", lambda: learn.run(_step(LearnConfig, config), lakehouse)),
        ("place", lambda: place.run(_step(PlaceConfig, config), lakehouse)),
        ("evaluate", lambda: evaluate.run(_step(EvaluateConfig, config), lakehouse)),
        ("validate", lambda: publish.run(RoutingValidate(), lakehouse)),
        (
            "publish",
            lambda: publish.run(RoutingPublish(margin=config.margin), lakehouse),
        ),
    ]
    jvm_pid = driver_jvm_pid(lakehouse.spark)
    timings: list[StepFigures] = []
    started = time.perf_counter()
    for name, step in steps:
        t0 = time.perf_counter()
        reset_peak()
        reset_peak(jvm_pid)
        code = step()
        timings.append(StepFigures(name, time.perf_counter() - t0, peak_mib(), peak_mib(jvm_pid)))
        print(f"{name}: done in {timings[-1].wall_s:.1f}s", flush=True)
        if code:
            print(f"step {name} failed (exit {code}); later steps not run")
            return int(code)
    total = time.perf_counter() - started
    counts = [
        [name, lakehouse.read(name).count() if lakehouse.exists(name) else 0]
        for name in (
            "bronze.posts",
            "silver.posts",
            "silver.posts_quarantine",
            "gold.post_words",
            "gold.word_stats",
            "gold.cooccurrence",
            "subscriptions.registry",
            "routing.mappings",
            "routing.placements",
            "routing.versions",
        )
    ]
    # peak RSS per step of this process (the Python driver) and of the driver's JVM
    whole = StepFigures(
        "total",
        total,
        _largest(t.driver_peak_mib for t in timings),
        _largest(t.jvm_peak_mib for t in timings),
    )
    print(
        format_table(
            ["step", "wall s", "driver peak MiB", "JVM peak MiB"],
            [t.row() for t in [*timings, whole]],
        )
    )
    print(format_table(["table", "rows"], counts))
    print(publish.render_versions(lakehouse))
    if config.report:
        Path(config.report).write_text(
            json.dumps(
                {
                    "steps": [asdict(t) for t in timings],
                    "total_s": total,
                    "rows": counts,
                },
                indent=2,
            )
        )
    return 0


@dataclass(frozen=True)
class StepFigures:
    """One step's wall time and the peak RSS (MiB) of the Python driver and of its JVM
    during it (None where it cannot be read)."""

    step: str
    wall_s: float
    driver_peak_mib: float | None
    jvm_peak_mib: float | None

    def row(self) -> list[object]:
        return [self.step, self.wall_s, _mib(self.driver_peak_mib), _mib(self.jvm_peak_mib)]


def _mib(value: float | None) -> int | str:
    return "" if value is None else round(value)


def _largest(values: Iterable[float | None]) -> float | None:
    return max((v for v in values if v is not None), default=None)


main = job_entry("pipeline", __doc__, PipelineConfig, run)


if __name__ == "__main__":
    exit_process(main())
