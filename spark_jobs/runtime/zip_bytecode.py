"""Bytecode inside Spark's Python zips, so that Spark's Python processes stop compiling
pyspark from source each time they start.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on the path of
every Python process it starts: each Python worker daemon of each executor, and the driver
of a ``spark-submit`` of a Python file (every Airflow task that submits a job). The zips
ship only ``.py`` files, and zipimport never writes bytecode, so each of those processes
compiled every pyspark module it imported from source: ``import pyspark.worker`` and the
stream's task module 1.41 -> 0.75 s of CPU with the bytecode in the zip (2-core VM,
2026-12-02). zipimport reads a ``module.pyc`` stored beside ``module.py`` in the archive;
this writes them as checked hash-based pycs (PEP 552): zipimport compares each with its
source's hash and compiles the source as before when they differ, so a stale or foreign
``.pyc`` costs time, never correctness, and a Python of another version ignores them (its
magic number differs).

``python -m spark_jobs.runtime.zip_bytecode [FOLDER]`` (``make setup`` and the image build run it):
FOLDER defaults to pyspark's ``python/lib``; each zip is rewritten beside itself and renamed
over the original (a hard-linked copy in an installer's cache is left as it was).
"""

from __future__ import annotations

import argparse
import importlib.util
import marshal
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

ZIP_NAMES = ("pyspark.zip", "py4j-*.zip")
# PEP 552's flags of a hash-based pyc whose hash is checked against the source
CHECKED_HASH = 0b11


@dataclass(frozen=True)
class ZipBytecode:
    """What :func:`add_bytecode` found and wrote in one zip."""

    path: Path
    modules: int
    written: int  # 0: every module already had its current bytecode


def _pyc(source: bytes, filename: str) -> bytes:
    code = compile(source, filename, "exec", dont_inherit=True)
    header = importlib.util.MAGIC_NUMBER + CHECKED_HASH.to_bytes(4, "little")
    return header + importlib.util.source_hash(source) + marshal.dumps(code)


def _current(pyc: bytes, source: bytes) -> bool:
    """This interpreter's checked hash pyc of exactly ``source`` (what zipimport accepts)."""
    return (
        pyc[:4] == importlib.util.MAGIC_NUMBER
        and int.from_bytes(pyc[4:8], "little") == CHECKED_HASH
        and pyc[8:16] == importlib.util.source_hash(source)
    )


def add_bytecode(path: Path) -> ZipBytecode:
    """Each ``.py`` of the zip at ``path`` with its current ``.pyc`` beside it."""
    with zipfile.ZipFile(path) as archive:
        entries = {info.filename: info for info in archive.infolist()}
        sources = [name for name in entries if name.endswith(".py")]
        if all(
            name + "c" in entries and _current(archive.read(name + "c"), archive.read(name))
            for name in sources
        ):
            return ZipBytecode(path, len(sources), 0)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
                for name, info in entries.items():
                    if name.endswith(".pyc") and name[:-1] in entries:
                        continue  # rewritten below, beside its source
                    data = archive.read(info)
                    out.writestr(info, data)
                    if name.endswith(".py"):
                        pyc = zipfile.ZipInfo(name + "c", info.date_time)
                        pyc.compress_type = zipfile.ZIP_DEFLATED
                        # the name a traceback shows: where zipimport would compile it from
                        out.writestr(pyc, _pyc(data, f"{path}{os.sep}{name}"))
            os.chmod(partial, path.stat().st_mode & 0o777)
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
    return ZipBytecode(path, len(sources), len(sources))


def spark_python_lib() -> Path:
    """The folder Spark's launcher takes the zips from: ``$SPARK_HOME/python/lib``, else
    the installed pyspark's own."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "python" / "lib"
    import pyspark

    return Path(pyspark.__file__).parent / "python" / "lib"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.runtime.zip_bytecode",
        description="Compile the Python modules inside Spark's pyspark and py4j zips.",
    )
    parser.add_argument("folder", nargs="?", type=Path, help="default: $SPARK_HOME/python/lib")
    args = parser.parse_args(argv)
    folder: Path = args.folder or spark_python_lib()
    zips = sorted({p for pattern in ZIP_NAMES for p in folder.glob(pattern)})
    if not zips:
        print(f"zip_bytecode: no pyspark.zip or py4j zip in {folder}", file=sys.stderr)
        return 1
    for path in zips:
        try:
            done = add_bytecode(path)
        except (OSError, zipfile.BadZipFile, SyntaxError) as error:
            print(f"zip_bytecode: {path}: {error}", file=sys.stderr)
            return 1
        state = f"compiled {done.written}" if done.written else "already compiled"
        print(f"{path}: {done.modules} modules, {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
