"""pyspark's zips carry bytecode that zipimport uses instead of compiling the source."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from spark_jobs.runtime import zip_bytecode

# Imports the package from the zip and prints each file the interpreter compiled from
# source (builtin compile() raises the "compile" audit event; loading a .pyc does not)
_IMPORT = """
import sys
compiled = []
sys.addaudithook(lambda event, args: compiled.append(str(args[1])) if event == "compile" else None)
sys.path.insert(0, sys.argv[1])
import pkg.mod
print(pkg.mod.VALUE)
print("\\n".join(dict.fromkeys(c for c in compiled if ".zip" in c)))  # once each
"""


def _zip(path: Path, value: str) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/__init__.py", "")
        archive.writestr("pkg/mod.py", f"VALUE = {value!r}\n")
    return path


def _import(path: Path) -> tuple[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    value, *compiled = done.stdout.splitlines()
    return value, [c for c in compiled if c]


def test_modules_load_from_the_added_bytecode_not_from_source(tmp_path):
    path = _zip(tmp_path / "lib.zip", "one")
    assert _import(path) == ("one", [f"{path}/pkg/__init__.py", f"{path}/pkg/mod.py"])

    done = zip_bytecode.add_bytecode(path)
    assert (done.modules, done.written) == (2, 2)
    assert _import(path) == ("one", [])
    assert zip_bytecode.add_bytecode(path).written == 0  # already current: left as it is


def test_a_stale_pyc_gives_way_to_its_changed_source_and_is_rewritten(tmp_path):
    path = _zip(tmp_path / "lib.zip", "old")
    zip_bytecode.add_bytecode(path)
    with zipfile.ZipFile(path) as archive:
        old_pyc = archive.read("pkg/mod.pyc")
    # a new source beside the old bytecode, as an upgrade that replaced only the .py would
    _zip(path, "new")
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("pkg/mod.pyc", old_pyc)
    value, compiled = _import(path)
    assert (value, compiled) == ("new", [f"{path}/pkg/__init__.py", f"{path}/pkg/mod.py"])

    assert zip_bytecode.add_bytecode(path).written == 2
    with zipfile.ZipFile(path) as archive:
        assert archive.namelist().count("pkg/mod.pyc") == 1
    assert _import(path) == ("new", [])


def test_the_command_compiles_a_folder_and_fails_on_one_without_zips(tmp_path, capsys):
    _zip(tmp_path / "pyspark.zip", "x")
    assert zip_bytecode.main([str(tmp_path)]) == 0
    assert "2 modules, compiled 2" in capsys.readouterr().out
    assert zip_bytecode.main([str(tmp_path)]) == 0
    assert "already compiled" in capsys.readouterr().out

    assert zip_bytecode.main([str(tmp_path / "empty")]) == 1
    assert "no pyspark.zip or py4j zip" in capsys.readouterr().err


def test_setup_compiled_the_installed_pysparks_zips(monkeypatch):
    """``make setup`` ran the command on the venv's pyspark (what its workers import)."""
    monkeypatch.delenv("SPARK_HOME", raising=False)
    folder = zip_bytecode.spark_python_lib()
    zips = sorted(folder.glob("*.zip"))
    assert [p.name for p in zips][-1] == "pyspark.zip"
    for path in zips:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            for name in (n for n in names if n.endswith(".py")):
                assert name + "c" in names, f"{path}: {name} has no bytecode"
