"""The tokeniser's code-point table kept on disk, for the Python workers of Spark jobs.

Building the table (:func:`core.text.encoder.classify_code_points`) takes 0.2-0.3 s of
CPU, in every Python worker of every job that encodes texts (the stream's route tasks, the
normalise job). :func:`install` makes the encoders read it from a file beside
``core/text`` written by the first process that built it, keyed by what the table is
computed from: the interpreter's ``re`` and ``str.lower``, its Unicode database, and the
source of the classifier and of the kernels' class codes. A read-only install, a damaged
file or one of another key: the table is built (and written where it can be).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
import unicodedata
from pathlib import Path

import numpy as np

from core.text import _tokenize_kernels, encoder


def cache_path() -> Path | None:
    """The table's file for this interpreter and this source; None when the source is not
    a file (imported from a zip)."""
    key = hashlib.sha256()
    for part in (sys.version, unicodedata.unidata_version):
        key.update(part.encode())
    try:
        for source in (Path(encoder.__file__), Path(_tokenize_kernels.__file__)):
            key.update(source.read_bytes())
    except OSError:
        return None
    name = f"code_point_classes.{key.hexdigest()[:16]}.npy"
    return Path(encoder.__file__).with_name("__pycache__") / name


def load_or_build(path: Path | None = None) -> np.ndarray:
    """The table from ``path`` (default :func:`cache_path`), else built and written there
    whole (a reader never sees a partial file)."""
    cache = cache_path() if path is None else path
    if cache is not None:
        with contextlib.suppress(OSError, ValueError):
            cached: np.ndarray = np.load(cache, allow_pickle=False)
            if cached.shape == (sys.maxunicode + 1,) and cached.dtype == np.uint8:
                return cached
    classes = encoder.classify_code_points()
    if cache is not None:
        # a name of its own per process and thread: two writers never share a partial file
        partial = cache.with_name(f"{cache.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            cache.parent.mkdir(exist_ok=True)
            with open(partial, "wb") as out:
                np.save(out, classes, allow_pickle=False)
            os.replace(partial, cache)
        except OSError:
            # a read-only install (a pod's read-only root): the table stays this process's
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
    return classes


def install() -> None:
    """The encoders of this process take the table from the file (read when first asked)."""
    encoder.use_code_point_classes(load_or_build)
