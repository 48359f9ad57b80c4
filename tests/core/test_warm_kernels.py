"""``python -m core.warm_kernels`` (run by ``make setup`` and the image build) compiles
every kernel a job calls, so that no later process compiles one: checked on an empty
numba cache, where each kernel compiled shows its signatures."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# kernels only ever called from other kernels (compiled inside their callers) or by tests
INNER = {"word_bit", "unpack_rows"}

_UNWARMED = """
import importlib, json, pkgutil
from numba.core.registry import CPUDispatcher
import core
from core.warm_kernels import warm_kernels
warm_kernels()
unwarmed, seen = [], 0
for info in pkgutil.walk_packages(core.__path__, "core."):
    if "_kernels" not in info.name.rsplit(".", 1)[-1]:
        continue
    module = importlib.import_module(info.name)
    for name, value in vars(module).items():
        if isinstance(value, CPUDispatcher) and value.__module__ == info.name:
            seen += 1
            if not value.signatures:
                unwarmed.append((info.name, name))
print(json.dumps({"seen": seen, "unwarmed": unwarmed}))
"""


def test_warming_compiles_every_kernel_a_job_calls(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}  # nothing cached yet
    done = subprocess.run(
        [sys.executable, "-c", _UNWARMED], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["seen"] > 60
    # a helper called inside other kernels (a leading underscore, or listed) has no
    # signature of its own; every other kernel was compiled
    missed = [f"{m}.{k}" for m, k in found["unwarmed"] if not k.startswith("_") and k not in INNER]
    assert missed == [], f"add a call of these kernels to core/warm_kernels.py: {missed}"
    # ... and the cache holds them for the next process
    assert any((tmp_path / "numba").rglob("*.nbc"))
