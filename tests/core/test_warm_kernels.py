"""``python -m core.warm_kernels`` (run by ``make setup`` and the image build) compiles
every kernel a job calls, so that no later process compiles one: after it, each kernel a
job calls has its signatures (compiled or loaded from the cache) and an index in the cache
that the next process reads.

The check runs on the checkout's own cache, which ``make setup`` filled by the same module:
on an empty cache it compiled everything again (80 s of a 2-core suite) to find the same
missing calls, since a kernel warm_kernels never calls has no signature either way."""

from __future__ import annotations

import json
import subprocess
import sys

# kernels called by tests only (a kernel that other kernels call is found below: loading
# its callers from the cache leaves it uncompiled, and nothing else needs it compiled)
TESTS_ONLY = {"unpack_rows"}

_UNWARMED = """
import importlib, json, os, pkgutil
from numba.core.registry import CPUDispatcher
import core
from core.warm_kernels import warm_kernels
warm_kernels()

def names_in(code):
    yield from code.co_names
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            yield from names_in(const)

kernels = []
for info in pkgutil.walk_packages(core.__path__, "core."):
    if "_kernels" not in info.name.rsplit(".", 1)[-1]:
        continue
    module = importlib.import_module(info.name)
    kernels += [
        (info.name, name, value)
        for name, value in vars(module).items()
        if isinstance(value, CPUDispatcher) and value.__module__ == info.name
    ]
# kernels another kernel calls: compiled into their callers
called_inside = {
    id(callee)
    for _, _, caller in kernels
    for name in names_in(caller.py_func.__code__)
    if isinstance(callee := caller.py_func.__globals__.get(name), CPUDispatcher)
}
unwarmed, uncached, seen = [], [], 0
for module_name, name, value in kernels:
    seen += 1
    if not value.signatures:
        if id(value) not in called_inside:
            unwarmed.append((module_name, name))
        continue
    cache_file = getattr(value._cache, "_cache_file", None)  # None: cache=False
    if cache_file is None or not os.path.isfile(cache_file._index_path):
        uncached.append((module_name, name))
print(json.dumps({"seen": seen, "unwarmed": unwarmed, "uncached": uncached}))
"""


def test_warming_compiles_every_kernel_a_job_calls():
    done = subprocess.run(
        [sys.executable, "-c", _UNWARMED],
        capture_output=True,
        text=True,
        timeout=900,  # a checkout whose cache is cold compiles everything: minutes
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["seen"] > 60
    # a helper with a leading underscore, or one called by tests only, may have no
    # signature; every other kernel was compiled or loaded
    missed = [
        f"{m}.{k}" for m, k in found["unwarmed"] if not k.startswith("_") and k not in TESTS_ONLY
    ]
    assert missed == [], f"add a call of these kernels to core/warm_kernels.py: {missed}"
    # ... and the cache holds each of them for the next process
    assert found["uncached"] == [], f"kernels with no cache index: {found['uncached']}"
