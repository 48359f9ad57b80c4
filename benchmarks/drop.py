"""``s3tm bench drop``: what a drop level costs per raw line, this tree against an earlier
revision (``--compare REV``; the probe is :mod:`benchmarks.drop_probe`).

Input, saved once and read by both trees: raw JSON lines (the real tweets with fresh ids,
or generated posts without them), and a value table over their words with seeded random
values (speed does not depend on what the values are, only the drop's choice does, and both
trees must make the same one).
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.options import DropBench
from core.corpus.records import ReadReport
from core.shedding.post_value import ValueTable
from spark_jobs.lake.corpus_files import iter_raw_posts


def _texts(corpus: Path | None, limit: int) -> list[str]:
    if corpus is not None:
        texts = [
            p.text
            for p in itertools.islice(iter_raw_posts(corpus, ReadReport(path=str(corpus))), limit)
        ]
        if texts:
            return texts
    from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus, render_post_text

    generated = generate_corpus(SyntheticCorpusSpec(n_posts=min(limit, 50_000), seed=0))
    rng = np.random.default_rng(0)
    return [
        render_post_text(
            generated.vocabulary[
                generated.indices[generated.indptr[p] : generated.indptr[p + 1]]
            ].tolist(),
            rng,
        )
        for p in range(generated.n_posts)
    ]


def save_input(folder: Path, corpus: Path | None, lines: int) -> tuple[Path, Path, str]:
    """(lines file, value table file, a label): ``lines`` JSON lines cycling over the
    corpus's texts, and a table over their words."""
    texts = _texts(corpus, lines)
    raw = [
        json.dumps({"id": f"{k}#{k // len(texts)}", "text": texts[k % len(texts)]}).encode()
        for k in range(lines)
    ]
    lines_path = folder / "lines.arrow"
    batch = pa.RecordBatch.from_arrays([pa.array(raw, pa.binary())], names=["line"])
    with pa.OSFile(str(lines_path), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    words = sorted({w.lower() for t in texts[:20_000] for w in t.split()})
    values = np.random.default_rng(0).exponential(1.0, len(words))
    table_path = folder / "table.npy"
    np.save(table_path, ValueTable.from_words(words, values).buckets)
    source = corpus.name if corpus is not None else "generated posts"
    return lines_path, table_path, f"{lines:,} lines of {source}"


def _count_kept(plan: object, batches):  # type: ignore[no-untyped-def]
    """mapInArrow body: the drop over each block Spark hands over -> lines kept."""
    from core.shedding.drop import drop_lines

    for batch in batches:
        kept = drop_lines(plan, batch.column("line"), 7).keep  # type: ignore[arg-type]
        yield pa.RecordBatch.from_arrays([pa.array([int(kept.sum())], pa.int64())], names=["n"])


def _count_rows(batches):  # type: ignore[no-untyped-def]
    """mapInArrow body: the hand-over alone (lines reach Python, nothing is done)."""
    for batch in batches:
        yield pa.RecordBatch.from_arrays([pa.array([batch.num_rows], pa.int64())], names=["n"])


def spark_costs(
    folder: Path, corpus: Path | None, lines: int, fraction: float, repeats: int, master: str
) -> dict[str, object]:
    """Wall time per raw line in the stream's own shape (text source, lines cast to bytes,
    ``mapInArrow`` with the stream's Arrow settings), best of ``repeats``: the JVM reading
    the lines, reading and handing them to a Python worker, and handing them over to be
    dropped there (a value drop of ``fraction``)."""
    import functools

    from pyspark.sql import functions as F

    from benchmarks.drop_probe import load_input
    from spark_jobs.lake.session import build_session
    from spark_jobs.stream.pipeline import STREAM_CONF

    lines_path, table_path, label = save_input(folder, corpus, lines)
    raw, plan = load_input(str(lines_path), str(table_path), fraction)
    text = folder / "lines"
    text.mkdir(exist_ok=True)
    (text / "part-0.jsonl").write_bytes(b"\n".join(raw.to_pylist()) + b"\n")
    spark = build_session("s3tm-bench-drop", master=master, conf=STREAM_CONF)
    frame = spark.read.text(str(text)).select(F.col("value").cast("binary").alias("line"))
    ways = {
        "read (JVM only)": lambda: frame.count(),
        "read + hand over to Python": lambda: (
            frame.mapInArrow(_count_rows, "n long").agg(F.sum("n")).collect()
        ),
        "read + hand over + drop": lambda: (
            frame.mapInArrow(functools.partial(_count_kept, plan), "n long")
            .agg(F.sum("n"))
            .collect()
        ),
    }
    for way in ways.values():  # a first round warms the JVM and the Python workers up
        way()
    best: dict[str, float] = {}
    for _ in range(repeats):
        for name, way in ways.items():
            started = time.perf_counter()
            way()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - started)
    return {
        "lines": label,
        "master": str(spark.sparkContext.master),
        **{f"{name} us/line": round(1e6 * best[name] / lines, 3) for name in ways},
    }


def run_spark(options: DropBench, corpus: Path | None) -> dict[str, object]:
    """:func:`spark_costs` in a scratch folder: printed, and written to ``drop_spark.csv``."""
    lines = options.lines
    fraction = options.fraction
    repeats = options.repeats
    master = options.master
    out = Path(options.out)
    import shutil
    import tempfile

    from benchmarks.experiments.report import write_csv
    from benchmarks.machine import machine_summary
    from core.formatting import format_table

    print(f"machine: {machine_summary()}")
    folder = Path(tempfile.mkdtemp(prefix="s3tm-bench-drop-"))
    try:
        row = spark_costs(folder, corpus, lines, fraction, repeats, master)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    row = {**row, "drop_fraction": fraction, "repeats": repeats}
    print(
        f"\na raw line's wall time in the stream's shape, best of {repeats} (lines dropped by "
        f"value: {fraction:.0%})"
    )
    print(format_table(list(row), [list(row.values())]))
    write_csv([row], out / "drop_spark.csv")
    print(f"wrote {out / 'drop_spark.csv'}")
    return row
