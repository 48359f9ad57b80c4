"""Installed in the image as ``s3tm_numba_cache`` and imported by a ``.pth`` file, so it
runs as every Python process of the image starts (a pod's command, ``kubectl exec``, a
Spark Python worker), before numba reads its settings.

numba refuses a kernel marked ``cache=True`` when it cannot write that kernel's cache
folder, which is the case for the image's compiled cache on a read-only root filesystem
(Pod Security "restricted" pods, infra/k8s). There the cache is copied once to the
temporary folder (an emptyDir in the manifests) and numba pointed at the copy: the
kernels load from it with no compile. A writable cache, or none, is left as it is."""

from __future__ import annotations

import os
import shutil
import tempfile


def _relocate() -> None:
    cache = os.environ.get("NUMBA_CACHE_DIR", "")
    if not cache or not os.path.isdir(cache) or os.access(cache, os.W_OK):
        return
    try:
        copy = os.path.join(tempfile.gettempdir(), "numba-cache")
        if not os.path.isdir(copy):
            # processes start side by side (Spark's workers): each copies to a folder of its
            # own and renames it into place; the first rename wins, the others are dropped
            mine = f"{copy}.{os.getpid()}"
            shutil.copytree(cache, mine)
            try:
                os.rename(mine, copy)
            except OSError:
                shutil.rmtree(mine, ignore_errors=True)
    except OSError:
        return  # no writable temporary folder: numba says so when a kernel needs its cache
    os.environ["NUMBA_CACHE_DIR"] = copy


_relocate()
