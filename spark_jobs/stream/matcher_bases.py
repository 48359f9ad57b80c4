"""The stream's matcher bases as files: one per matcher, written by the driver when a
routing version is loaded (or the changes since the last base grow past a tenth of it),
read by the match task that runs the matcher.

A base lives under the stream's checkpoint (``<checkpoint>/matcher-bases/<owner>/v<version>-
e<epoch>/matcher-<m>.npz``), a local folder or an object store, which every executor can
read: an executor reads only the matchers its tasks run, and reads each once per base (the
Python worker's cache, :class:`core.stream.worker.MatcherCache`, keeps it).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence

import numpy as np

from core.errors import InputDataError
from core.stream.snapshot import MatcherSubs
from spark_jobs.lake.storage import filesystem, join

log = logging.getLogger(__name__)

FOLDER = "matcher-bases"
_FIELDS = ("sub_ids", "indptr", "word_ids", "subscriber_codes")


def bases_root(checkpoint: str) -> str:
    return join(checkpoint, FOLDER)


def _name(matcher: int) -> str:
    return f"matcher-{matcher:05d}.npz"


class FileBases:
    """A :class:`core.stream.snapshot.BaseStore` on a file system or an object store."""

    def write(self, location: str, matchers: Sequence[MatcherSubs]) -> None:
        fs, root = filesystem(location)
        fs.create_dir(root, recursive=True)
        for m, subs in enumerate(matchers):
            buffer = io.BytesIO()
            np.savez(buffer, **{f: getattr(subs, f) for f in _FIELDS})
            # a base is written once, before the snapshot naming it is broadcast: no task
            # reads it half written
            target = f"{root}/{_name(m)}"
            with fs.open_output_stream(target) as out:
                out.write(buffer.getvalue())

    def read(self, location: str, matcher: int) -> MatcherSubs:
        fs, root = filesystem(location)
        path = f"{root}/{_name(matcher)}"
        try:
            with fs.open_input_file(path) as source:
                data = source.read()
        except (FileNotFoundError, OSError) as err:
            raise InputDataError(f"matcher {matcher}'s base is missing at {location}") from err
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return MatcherSubs(*(arrays[f] for f in _FIELDS))

    def remove(self, location: str) -> None:
        """Remove a base (absent: nothing)."""
        fs, root = filesystem(location)
        try:
            fs.delete_dir(root)
        except (FileNotFoundError, OSError) as err:
            log.debug("stream: base %s not removed: %s", location, err)

    def remove_others(self, root: str, keep_owner: str) -> None:
        """Remove the bases of every other stream run under ``root`` (a restarted stream
        writes its own)."""
        import pyarrow.fs as pafs

        fs, path = filesystem(root)
        try:
            entries = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        except OSError as err:
            log.debug("stream: bases under %s not listed: %s", root, err)
            return
        for entry in entries:
            if entry.type == pafs.FileType.Directory and entry.base_name != keep_owner:
                try:
                    fs.delete_dir(entry.path)
                except OSError as err:
                    log.debug("stream: old bases %s not removed: %s", entry.path, err)
