"""The contracts between layers are types: no ``argparse.Namespace`` below the command
line, no ``Any`` in the public signatures of ``spark_jobs``, row types that agree with the
table schemas, and modules of one job each (at most 600 lines in core and spark_jobs)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from schemas import table
from schemas.rows import ROW_TYPES

REPO = Path(__file__).resolve().parents[1]
LIBRARY = ("core", "schemas", "spark_jobs", "dags", "s3tm", "benchmarks")
# the command lines: where parsed arguments become typed configs
CLI = ("s3tm/cli/", "benchmarks/cli.py", "benchmarks/experiments/cli.py")
MAX_LINES = 600


def _sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py"))


def test_no_argparse_namespace_below_the_command_line() -> None:
    found = []
    for path in _sources(*LIBRARY):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(CLI):
            continue
        text = path.read_text()
        for needle in ("argparse.Namespace", "getattr(args", "SimpleNamespace"):
            if needle in text:
                found.append(f"{relative}: {needle}")
    assert found == []


def _mentions_any(annotation: ast.expr) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id == "Any")
        or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "Any" in n.value)
        for n in ast.walk(annotation)
    )


def public_signatures_with_any(source: str) -> list[str]:
    """Public functions and methods of public classes whose annotations mention ``Any``."""
    found = []

    def check(function: ast.FunctionDef | ast.AsyncFunctionDef, owner: str) -> None:
        if function.name.startswith("_") and function.name not in ("__init__", "__call__"):
            return
        arguments = function.args
        annotations = [
            a.annotation
            for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)
            if a.annotation is not None
        ]
        for extra in (arguments.vararg, arguments.kwarg):
            if extra is not None and extra.annotation is not None:
                annotations.append(extra.annotation)
        if function.returns is not None:
            annotations.append(function.returns)
        if any(_mentions_any(a) for a in annotations):
            found.append(f"{owner}{function.name}")

    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            check(node, "")
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    check(member, f"{node.name}.")
    return found


def test_the_any_checker_sees_parameters_returns_and_methods() -> None:
    source = (
        "from typing import Any\n"
        "def a(x: Any) -> int: ...\n"
        "def b(x: int) -> dict[str, Any]: ...\n"
        "def _private(x: Any) -> Any: ...\n"
        "def c(*xs: 'Any') -> None: ...\n"
        "class K:\n"
        "    def m(self, x: list[Any]) -> None: ...\n"
        "    def _n(self, x: Any) -> None: ...\n"
        "def d(x: object) -> None: ...\n"
    )
    assert public_signatures_with_any(source) == ["a", "b", "c", "K.m"]


def test_no_any_in_the_public_signatures_of_spark_jobs() -> None:
    found = [
        f"{path.relative_to(REPO)}: {name}"
        for path in _sources("spark_jobs")
        for name in public_signatures_with_any(path.read_text())
    ]
    assert found == []


def test_modules_of_core_and_spark_jobs_stay_small() -> None:
    sizes = {
        path.relative_to(REPO).as_posix(): len(path.read_text().splitlines())
        for path in _sources("core", "spark_jobs")
    }
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}


@pytest.mark.parametrize("name", sorted(ROW_TYPES))
def test_row_types_have_the_table_columns(name: str) -> None:
    keys = set(typing.get_type_hints(ROW_TYPES[name]))
    assert keys == set(table(name).columns)


def test_matplotlib_is_the_bench_extra_only() -> None:
    """The platform draws nothing: only the benchmarks and experiments import matplotlib,
    and the base install does not pull it in (the ``bench`` extra does)."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("matplotlib")]
    assert [d for d in project["optional-dependencies"]["bench"] if d.startswith("matplotlib")]
    importers = []
    for path in _sources(*LIBRARY):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith("benchmarks/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] == "matplotlib" for n in names):
                importers.append(relative)
    assert importers == []


def test_core_learn_exports_load_lazily_and_all_of_them() -> None:
    """``core.learn`` names its exports once (``__all__``) and loads each on first use, so
    light modules of the package (``remap_params``) do not import the learners."""
    import subprocess
    import sys

    import core.learn

    assert sorted(core.learn.__all__) == sorted(core.learn._MODULE_OF)
    for name in core.learn.__all__:
        assert getattr(core.learn, name) is not None
    code = (
        "import sys, core.learn.remap_params, schemas.rows\n"
        "print(sorted(m for m in ('scipy', 'core.learn.api', 'numba') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_streams_functions_each_do_one_step() -> None:
    """Every function in spark_jobs/stream reads in one screen (under 60 lines)."""
    lengths = {
        f"{path.relative_to(REPO)}:{node.name}": (node.end_lineno or node.lineno) - node.lineno + 1
        for path in _sources("spark_jobs/stream")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    long = {name: lines for name, lines in lengths.items() if lines >= 60}
    assert long == {}
