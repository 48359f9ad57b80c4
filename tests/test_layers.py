"""The layers (docs/ARCHITECTURE.md, "Layout"): nothing imports upward.

core (pure) <- schemas <- spark_jobs (lake, jobs, stream) <- s3tm (application) and dags;
benchmarks (the benchmarks and experiments, beside the package) may use all but dags.
Every import statement of every module is checked, the lazy ones inside functions too.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable, Collection
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# What each layer may not import (top-level package names).
FORBIDDEN = {
    "core": {
        "schemas",
        "spark_jobs",
        "s3tm",
        "dags",
        "pyspark",
        "airflow",
        "deltalake",
        "delta",
        "great_expectations",
        "benchmarks",
        "devtools",
    },
    "schemas": {"spark_jobs", "s3tm", "dags", "benchmarks", "devtools"},
    "spark_jobs": {"s3tm", "dags", "benchmarks", "devtools"},
    # the checkout's commands are imported by the names s3tm.cli.main declares
    # (COMMAND_GROUPS), which test_the_cli_reaches_the_checkout_by_declared_names checks
    "s3tm": {"dags", "benchmarks", "devtools"},
    "dags": {"benchmarks", "devtools"},
    "benchmarks": {"dags"},
    "devtools": {"dags", "benchmarks"},
}
# Modules a DAG file may not load while it is parsed (the dag-processor parses every file
# every few seconds: heavy imports belong inside tasks).
HEAVY_AT_PARSE = [
    "pyspark",
    "deltalake",
    "numba",
    "pandas",
    "great_expectations",
    "sklearn",
    "scipy",
    "matplotlib",
]


def imported_packages(path: Path) -> set[str]:
    """Top-level names of every absolute import in a module (lazy imports included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            # importlib.import_module("spark_jobs.x") / f"spark_jobs.{name}"
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value.split(".")[0])
            elif isinstance(arg, ast.JoinedStr) and arg.values:
                head = arg.values[0]
                if isinstance(head, ast.Constant) and isinstance(head.value, str):
                    names.add(head.value.split(".")[0])
    return names


def modules_of(layer: str) -> list[Path]:
    return sorted((REPO / layer).rglob("*.py"))


def offences(layer: str, found: Callable[[Path], Collection[str]]) -> dict[str, list[str]]:
    """What ``found`` finds in each module of ``layer``, by module (none: an empty dict)."""
    modules = modules_of(layer)
    assert modules, f"no module found under {layer}/"
    by_module = {str(path.relative_to(REPO)): sorted(found(path)) for path in modules}
    return {path: bad for path, bad in by_module.items() if bad}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_layer_imports_upward(layer):
    upward = offences(layer, lambda path: imported_packages(path) & FORBIDDEN[layer])
    assert upward == {}, f"{layer} imports a layer above it: {upward}"


def test_the_checker_sees_lazy_and_dynamic_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import os\n"
        "def f():\n"
        "    from spark_jobs.lake import delta_io\n"
        "    import pyspark.sql\n"
        "    return importlib.import_module(f'dags.{x}')\n"
        "from . import sibling\n"
    )
    assert imported_packages(module) == {"os", "spark_jobs", "pyspark", "dags"}


# calls that reach a file system (core takes arrays and gives arrays: reading and writing
# files is the layers' above, spark_jobs and the application): pathlib's methods by name,
# the rest by the module they are called on
PATH_METHODS = {
    "read_text", "read_bytes", "write_text", "write_bytes", "mkdir", "unlink", "iterdir",
    "glob", "rglob", "touch", "rmdir", "open",
}  # fmt: skip
MODULE_CALLS = {
    "os": {"replace", "rename", "remove", "unlink", "makedirs", "mkdir", "listdir", "scandir"},
    "np": {"load", "save", "savez", "savez_compressed", "fromfile", "loadtxt", "savetxt"},
    "json": {"load", "dump"},
    "pickle": {"load", "dump"},
    "resources": {"files", "read_text", "open_text"},
    "shutil": {"copy", "copyfile", "copytree", "move", "rmtree"},
    "gzip": {"open"},
    "pq": {"read_table", "write_table", "ParquetFile"},
}


def file_calls(path: Path) -> list[str]:
    """``name:line`` of each call in a module that reaches a file system: ``open()``, a
    path's reads and writes, and the file functions of os, numpy, json, shutil, ..."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append(f"open:{node.lineno}")
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if func.attr in MODULE_CALLS.get(owner or "", set()) or (
                owner not in MODULE_CALLS and func.attr in PATH_METHODS
            ):
                found.append(f"{func.attr}:{node.lineno}")
    return found


def test_core_does_no_file_io():
    reaching = offences("core", file_calls)
    assert reaching == {}, f"core reaches a file system: {reaching}"


def test_the_file_io_checker_sees_reads_writes_and_loads(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import numpy as np\n"
        "text = dataclasses.replace(x, y=1), {1}.remove(1), store.load(2)\n"
        "def f(path):\n"
        "    with open(path) as lines:\n"
        "        np.save(path, path.read_bytes())\n"
        "    os.replace(path, path)\n"
    )
    assert sorted(file_calls(module)) == ["open:4", "read_bytes:5", "replace:6", "save:5"]


# of core and spark_jobs, only the settings, the remap's option defaults and the error
# types while a DAG is parsed
LIGHT_AT_PARSE = [
    "core",
    "core.errors",
    "core.remap_options",
    "spark_jobs",
    "spark_jobs.settings",
    "spark_jobs.kafka_security",  # the deployment's broker and topic: os and core.errors
    "spark_jobs.options",  # Template and job_argv: dataclasses and typing
    "spark_jobs.jobs",
    "spark_jobs.jobs.configs",  # the jobs' options, whose defaults the DAG params are
    "spark_jobs.lake",
    "spark_jobs.lake.storage",  # the lakehouse root's spelling
]


def test_dag_files_parse_without_heavy_imports():
    dags = sorted(p.name for p in (REPO / "dags").glob("*.py"))
    assert dags, "no DAG file found"
    script = (
        "import importlib, json, sys\n"
        f"sys.path.insert(0, {str(REPO / 'dags')!r})\n"
        f"for name in {[d[:-3] for d in dags]!r}: importlib.import_module(name)\n"
        f"print(json.dumps([h for h in {HEAVY_AT_PARSE!r} if h in sys.modules]"
        f" + [m for m in sys.modules if m.split('.')[0] in ('core', 'spark_jobs')"
        f" and m not in {LIGHT_AT_PARSE!r}]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded == [], f"parsing {dags} loaded {loaded}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(layers: list[str]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (lazy and type-checking imports included:
    a cycle among them is still two modules that cannot be read one without the other)."""
    paths = [p for layer in layers for p in modules_of(layer)]
    known = {_module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        this = _module_name(path)
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # ``from a.b import c``: module a.b.c when it is one, else a.b
                names = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                    for a in node.names
                ]
            edges.update(n for n in names if n in known and n != this)
        graph[this] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_cycle():
    graph = import_graph(["core", "schemas", "spark_jobs", "s3tm", "dags"])
    assert len(graph) > 100
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def package_graph(graph: dict[str, set[str]], depth: int) -> dict[str, set[str]]:
    """The module graph folded to packages of ``depth`` parts (``core.stream``): a package
    depends on another when one of its modules imports one of the other's."""

    def package(module: str) -> str:
        return ".".join(module.split(".")[:depth])

    folded: dict[str, set[str]] = {}
    for module, edges in graph.items():
        here = package(module)
        folded.setdefault(here, set()).update(package(e) for e in edges if package(e) != here)
    return folded


def test_core_packages_depend_on_each_other_one_way():
    """core's packages (core.stream, core.shedding, core.monitor, ...) form no circle: the
    stream applies shedding's primitives, shedding never reaches back into the stream."""
    packages = package_graph(import_graph(["core"]), depth=2)
    assert len(packages) > 8
    assert import_cycles(packages) == []
    assert "core.stream" not in packages["core.shedding"]


def test_the_package_fold_finds_two_packages_that_import_each_other():
    graph = {"p.a.x": {"p.b.y"}, "p.b.y": {"p.b.z"}, "p.b.z": {"p.a.w"}, "p.a.w": set()}
    assert import_cycles(package_graph(graph, depth=2)) == [["p.a", "p.b"]]


def test_the_top_of_spark_jobs_holds_the_job_helpers_only():
    """Its subpackages (jobs, lake, stream, sql, runtime) show the data flow; at its top
    only what every job shares (at most eight modules)."""
    top = sorted(p.name for p in (REPO / "spark_jobs").glob("*.py"))
    assert len(top) <= 8, top


def test_the_cli_reaches_the_checkout_by_declared_names():
    """s3tm's only way to a checkout package (tools/, benchmarks/) is a command group that
    s3tm.cli.main declares by module name; it never adds to sys.path."""
    from s3tm.cli.main import CHECKOUT_PACKAGES, COMMAND_GROUPS

    declared = {m for m in COMMAND_GROUPS if m.split(".")[0] in CHECKOUT_PACKAGES}
    assert declared and all((REPO / (m.replace(".", "/") + ".py")).is_file() for m in declared)
    source = (REPO / "s3tm" / "cli" / "main.py").read_text()
    assert "sys.path" not in source
