"""One side of ``s3tm bench drop``: times a drop level on saved raw lines, one core, and
prints one JSON line.

Run as a script with the tree under test first on ``PYTHONPATH``, so that the same probe
measures an earlier revision's code and this one's on identical input. Imports only what
every revision with drop levels has: ``drop_lines``, ``ShedPlan`` and ``ValueTable``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

import numpy as np
import pyarrow as pa


def load_input(lines_path: str, table_path: str, fraction: float):  # type: ignore[no-untyped-def]
    """(raw lines, the drop plan) saved by :func:`benchmarks.drop.save_input`."""
    from core.shedding.plan import ShedPlan
    from core.shedding.post_value import ValueTable

    with pa.memory_map(lines_path) as source:
        lines = pa.ipc.open_file(source).read_all().column("line").combine_chunks()
    plan = ShedPlan(
        utility="yield",
        level=1,
        max_spread=1.0,
        exempt_fraction=0.02,
        drop_fraction=fraction,
        drop_values=ValueTable(np.load(table_path)),
    )
    return lines, plan


def main(lines_path: str, table_path: str, fraction: float, repeats: int) -> dict[str, object]:
    from core.shedding.drop import drop_lines

    lines, plan = load_input(lines_path, table_path, fraction)
    seed = 7
    kept = drop_lines(plan, lines, seed)  # the first call loads (or compiles) the kernels
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        drop_lines(plan, lines, seed)
        best = min(best, time.perf_counter() - started)
    return {
        "lines": len(lines),
        "us_per_line": 1e6 * best / len(lines),
        "dropped": kept.dropped,
        # which lines went: both revisions must drop exactly the same ones (replays)
        "keep_sha1": hashlib.sha1(np.packbits(kept.keep).tobytes()).hexdigest(),
    }


if __name__ == "__main__":
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, like a task
    print(json.dumps(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))))
