"""``s3tm bench delta-engines``: the remap chain and the stream with each Delta engine, side
by side.

The same demo corpus and subscriptions go through ``s3tm pipeline`` (ingest -> publish, one
fresh process and lakehouse per run) with delta-spark committing the jobs' DataFrame writes
(``S3TM_DELTA_ENGINE=spark``, with the resolved jars) and with the delta-rs bridge
(``S3TM_DELTA_ENGINE=rs``: executors write Parquet, the driver commits with delta-rs).
Runs alternate (spark, rs, rs, spark, ...) so drift on a shared machine falls on both; the
figures are medians per step with their min-max, and the ratio rs / spark (above 1: the
bridge is slower). After each chain the stream takes the same corpus through the published
version (``stream``: its batches' seconds; ``stream_commit``: their commit phase, where the
engines differ: delta-spark reads the tasks' staged rows back and writes them).
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.machine import machine_summary
from core.errors import InputDataError
from spark_jobs.settings import env_name

ENGINES = ("spark", "rs")
STEP_LINE = re.compile(r"^(\w+)\s+([\d,]+\.\d+)(?:\s|$)")


@dataclass(frozen=True)
class EngineRun:
    """One chain run: its engine and each step's wall seconds (``total`` included)."""

    engine: str
    run: int
    steps: dict[str, float]


def _s3tm(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "s3tm.cli.main", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
        check=False,
    )
    if done.returncode != 0:
        raise InputDataError(f"s3tm {argv[0]} failed: {done.stderr[-2000:]}")
    return done.stdout


def parse_steps(stdout: str) -> dict[str, float]:
    """The pipeline's ``step  wall s`` table as {step: seconds}."""
    steps: dict[str, float] = {}
    for line in stdout.splitlines():
        match = STEP_LINE.match(line.strip())
        if match:
            steps[match.group(1)] = float(match.group(2).replace(",", ""))
        elif steps and "total" in steps:
            break
    if "total" not in steps:
        raise InputDataError(f"no step table in the pipeline's output: {stdout[-1000:]}")
    return steps


def run_chain(engine: str, landing: Path, work: Path, run: int, nodes: int) -> EngineRun:
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.subscription_store import add_subscriptions

    lakehouse = work / f"lake-{engine}-{run}"
    phrases = (work / "phrases.txt").read_text().splitlines()
    add_subscriptions(Lakehouse(None, lakehouse, engine="rs"), phrases, "bench")
    env = {**os.environ, env_name("delta_engine"): engine}
    env[env_name("spark_log_level")] = "ERROR"
    out = _s3tm(
        ["pipeline", "--master", "local[2]", "--lakehouse", str(lakehouse),
         "--landing", str(landing), "--batch-id", "1", "--nodes", str(nodes),
         "--no-cooccurrence"],
        env,
    )  # fmt: skip
    steps = parse_steps(out)
    # the stream: the landed corpus through the published version, its batches' own
    # seconds (stream.batches: plan to commit, without the JVM's start)
    _s3tm(
        ["stream", "--master", "local[2]", "--lakehouse", str(lakehouse), "run",
         "--landing", str(landing), "--available-now",
         "--checkpoint", str(work / f"checkpoint-{engine}-{run}")],
        env,
    )  # fmt: skip
    batches = [
        r
        for r in Lakehouse(None, lakehouse, engine="rs").read_arrow("stream.batches").to_pylist()
        if r["stage"] == "committed"
    ]
    steps["stream"] = sum(float(r["seconds_total"]) for r in batches)
    steps["stream_commit"] = sum(float(r["seconds_commit"] or 0.0) for r in batches)
    return EngineRun(engine, run, steps)


def bench_delta_engines(posts: int, runs: int, nodes: int, out: Path) -> list[EngineRun]:
    """Run the chain ``runs`` times per engine, alternating; print and write the figures."""
    from core.corpus.synthetic import SyntheticCorpusSpec
    from core.text import normalize
    from spark_jobs.lake.corpus_files import write_demo_corpus
    from spark_jobs.lake.session import delta_jars_present

    if not delta_jars_present():
        raise InputDataError("delta-spark's jars are not resolved here: run `make setup`")
    results: list[EngineRun] = []
    with tempfile.TemporaryDirectory(prefix="s3tm-delta-engines-") as scratch:
        work = Path(scratch)
        landing = work / "landing"
        corpus = landing / "demo.jsonl.gz"
        write_demo_corpus(corpus, SyntheticCorpusSpec(n_posts=posts, seed=3), days=2)
        with gzip.open(corpus, "rt") as lines:
            texts = [json.loads(next(lines))["text"] for _ in range(400)]
        phrases = [" ".join(normalize(t)[:2]) for t in texts[::4] if normalize(t)]
        (work / "phrases.txt").write_text("\n".join(phrases))
        for run in range(runs):
            order = ENGINES if run % 2 == 0 else ENGINES[::-1]
            for engine in order:
                started = time.perf_counter()
                result = run_chain(engine, landing, work, run, nodes)
                results.append(result)
                print(
                    f"run {run + 1}/{runs} {engine}: chain {result.steps['total']:.1f}s "
                    f"(process {time.perf_counter() - started:.1f}s)",
                    file=sys.stderr,
                    flush=True,
                )
    _report(results, posts, runs, out)
    return results


def _report(results: list[EngineRun], posts: int, runs: int, out: Path) -> None:
    steps = list(results[0].steps)
    rows = []
    for step in steps:
        by_engine = {e: [r.steps[step] for r in results if r.engine == e] for e in ENGINES}
        spark, rs = (statistics.median(by_engine[e]) for e in ENGINES)
        rows.append(
            {
                "step": step,
                "posts": posts,
                "runs": runs,
                "spark_s": round(spark, 3),
                "spark_min_max": f"{min(by_engine['spark']):.2f}-{max(by_engine['spark']):.2f}",
                "rs_s": round(rs, 3),
                "rs_min_max": f"{min(by_engine['rs']):.2f}-{max(by_engine['rs']):.2f}",
                "rs_over_spark": round(rs / spark, 3) if spark > 0 else "",
            }
        )
    machine = machine_summary()
    print(f"machine: {machine}")
    print(
        f"the remap chain (s3tm pipeline, local[2]) then the stream on {posts:,} demo posts, "
        f"{runs} alternating runs per engine, medians (min-max); rs/spark above 1: the "
        "delta-rs bridge is slower"
    )
    print(f"{'step':<10} {'delta-spark s':>22} {'delta-rs bridge s':>22} {'rs/spark':>9}")
    for row in rows:
        print(
            f"{row['step']:<10} {row['spark_s']:>8.2f} ({row['spark_min_max']:>11}) "
            f"{row['rs_s']:>8.2f} ({row['rs_min_max']:>11}) {row['rs_over_spark']:>9}"
        )
    out.mkdir(parents=True, exist_ok=True)
    path = out / "delta_engines.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*rows[0], "machine"])
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "machine": machine})
    print(f"wrote {path}")
