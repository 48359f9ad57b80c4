"""``s3tm bench chain``: the nightly remap chain (``s3tm pipeline``) on N posts, step by step.

What a platform team would feed the nightly remap: a synthetic corpus of N posts over 7 days
(``s3tm demo-corpus``, gzipped parts of 500k posts; kept in the work directory and reused
by the next run of the same size), subscriptions drawn from the posts themselves (1-3 of a
post's first normalised words, every 5th post of the first part, seeded: single popular
words among them, so matches run to hundreds a post), and then the whole chain in one Spark
session, in a fresh lakehouse. Printed: each step's wall time and the peak RSS of the Python
driver and of its JVM; written: one CSV row per step (``docs/bench/chain_scale.csv``).
"""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.machine import machine_summary
from core.errors import S3TMError
from core.formatting import format_table
from core.text import normalize

POSTS_PER_FILE = 500_000
DAYS = 7
SUBSCRIPTION_EVERY = 5  # every 5th post of the first part gives one subscription


@dataclass(frozen=True)
class ChainConfig:
    posts: int
    subscriptions: int
    nodes: int
    algorithm: str
    master: str
    workdir: Path
    out: Path
    seed: int = 0


def landing_files(config: ChainConfig) -> Path:
    """The corpus' landing directory, written once per size and seed (a marker beside it
    says it is complete: a killed run leaves no half corpus to be reused)."""
    landing = config.workdir / f"landing-{config.posts}-{config.seed}"
    done = landing.with_name(landing.name + ".complete")
    if done.exists():
        print(f"reusing the corpus in {landing}", flush=True)
        return landing
    shutil.rmtree(landing, ignore_errors=True)
    command = [
        *_s3tm(),
        "demo-corpus",
        "--posts",
        str(config.posts),
        "--days",
        str(DAYS),
        "--seed",
        str(config.seed),
        "--posts-per-file",
        str(POSTS_PER_FILE),
        "--out",
        str(landing),
    ]
    subprocess.run(command, check=True)
    done.touch()
    return landing


def subscription_phrases(landing: Path, count: int, seed: int) -> list[str]:
    """``count`` phrases of 1-3 normalised words of the posts of the first landing file."""
    rng = np.random.default_rng(seed)
    phrases: list[str] = []
    first = sorted(landing.glob("*.jsonl.gz"))[0]
    with gzip.open(first, "rt", encoding="utf-8") as lines:
        for row, line in enumerate(lines):
            if row % SUBSCRIPTION_EVERY:
                continue
            words = normalize(json.loads(line)["text"])
            if words:
                phrases.append(" ".join(words[: int(rng.integers(1, 4))]))
            if len(phrases) == count:
                return phrases
    raise S3TMError(f"{first} gave {len(phrases)} subscriptions of the {count} asked for")


def run(config: ChainConfig) -> list[dict[str, object]]:
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.subscription_store import add_subscriptions

    config.workdir.mkdir(parents=True, exist_ok=True)
    landing = landing_files(config)
    lake = config.workdir / f"lake-{config.posts}"
    shutil.rmtree(lake, ignore_errors=True)
    phrases = subscription_phrases(landing, config.subscriptions, config.seed)
    add_subscriptions(Lakehouse(None, str(lake), engine="rs"), phrases, "bench")
    print(f"{len(phrases):,} subscriptions registered in {lake}", flush=True)
    report = config.workdir / f"report-{config.posts}.json"
    started = time.perf_counter()
    command = [
        *_s3tm(),
        "pipeline",
        "--master",
        config.master,
        "--lakehouse",
        str(lake),
        "--landing",
        str(landing),
        "--batch-id",
        "1",
        "--nodes",
        str(config.nodes),
        "--algorithm",
        config.algorithm,
        "--report",
        str(report),
    ]
    code = subprocess.run(command, check=False).returncode
    if code:
        seconds = time.perf_counter() - started
        raise S3TMError(f"the pipeline failed (exit {code}) after {seconds:.0f} s")
    steps = json.loads(report.read_text())["steps"]
    rows: list[dict[str, object]] = [
        {
            "posts": config.posts,
            "subscriptions": config.subscriptions,
            "nodes": config.nodes,
            "algorithm": config.algorithm,
            "step": s["step"],
            "wall_s": round(float(s["wall_s"]), 3),
            "driver_peak_mib": _rounded(s["driver_peak_mib"]),
            "jvm_peak_mib": _rounded(s["jvm_peak_mib"]),
        }
        for s in steps
    ]
    total = sum(float(s["wall_s"]) for s in steps)
    rows.append({**rows[-1], "step": "total", "wall_s": round(total, 3),
                 "driver_peak_mib": max(_peak(rows, "driver_peak_mib")),
                 "jvm_peak_mib": max(_peak(rows, "jvm_peak_mib"))})  # fmt: skip
    print(
        f"\nthe chain at {config.posts:,} posts, {config.subscriptions:,} subscriptions, "
        f"{config.algorithm} N = {config.nodes}, {config.master} ({machine_summary()}):"
    )
    print(
        format_table(
            ["step", "wall s", "driver peak MiB", "JVM peak MiB"],
            [[r["step"], r["wall_s"], r["driver_peak_mib"], r["jvm_peak_mib"]] for r in rows],
        )
    )
    _write_csv(config.out / "chain_scale.csv", rows)
    return rows


def _s3tm() -> list[str]:
    return [sys.executable, "-c", "from s3tm.cli.main import main; raise SystemExit(main())"]


def _rounded(value: object) -> int | str:
    return "" if value is None else round(float(str(value)))


def _peak(rows: list[dict[str, object]], key: str) -> list[int]:
    return [int(str(r[key])) for r in rows if r[key] != ""] or [0]


def _write_csv(path: Path, rows: list[dict[str, object]]) -> None:
    """Replace this size's rows, keep the other sizes'."""
    kept: list[dict[str, object]] = []
    if path.exists():
        with path.open() as existing:
            kept = [r for r in csv.DictReader(existing) if r["posts"] != str(rows[0]["posts"])]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([*kept, *rows])
    print(f"wrote {path}")
