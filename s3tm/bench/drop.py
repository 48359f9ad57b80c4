"""``s3tm bench drop``: what a drop level costs per raw line, this tree against an earlier
revision (``--compare REV``; the probe is :mod:`s3tm.bench.drop_probe`).

Input, saved once and read by both trees: raw JSON lines (the real tweets with fresh ids,
or generated posts without them), and a value table over their words with seeded random
values (speed does not depend on what the values are, only the drop's choice does, and both
trees must make the same one).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from core.corpus.io import ReadReport, iter_raw_posts
from core.shedding.post_value import ValueTable


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
