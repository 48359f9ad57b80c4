"""The tokeniser's code-point table on disk (spark_jobs.runtime.code_point_cache): each process
reads the table a first one wrote, the cached table is the classifier's, and a damaged or
missing file is rebuilt."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.text import encoder
from spark_jobs.runtime import code_point_cache


def test_the_table_is_written_once_read_after_and_rebuilt_when_damaged(tmp_path, monkeypatch):
    cache = tmp_path / "__pycache__" / "code_point_classes.test.npy"
    fresh = encoder.classify_code_points()
    built = code_point_cache.load_or_build(cache)  # no file yet: builds it and writes it
    assert np.array_equal(built, fresh) and cache.is_file()
    assert list(cache.parent.iterdir()) == [cache]  # no partial file left

    def refused() -> np.ndarray:
        raise AssertionError("the table was built again although the file holds it")

    monkeypatch.setattr(encoder, "classify_code_points", refused)
    assert np.array_equal(code_point_cache.load_or_build(cache), fresh)
    monkeypatch.undo()
    cache.write_bytes(b"not a numpy file")
    assert np.array_equal(code_point_cache.load_or_build(cache), fresh)
    assert np.array_equal(np.load(cache), fresh)  # and written again whole


def test_installed_the_encoders_read_the_file(tmp_path, monkeypatch):
    cache = tmp_path / "classes.npy"
    np.save(cache, encoder.classify_code_points(), allow_pickle=False)
    monkeypatch.setattr(code_point_cache, "cache_path", lambda: cache)
    monkeypatch.setattr(encoder, "classify_code_points", lambda: pytest.fail("built again"))
    try:
        code_point_cache.install()
        words = encoder.normalize_arrow(["Storm warning tonight", "cup final"]).to_pylist()
        assert words == [["storm", "tonight", "warn"], ["cup", "final"]]
    finally:
        encoder.use_code_point_classes(None)


def test_the_file_is_beside_the_encoder_keyed_by_what_the_table_is_built_from(monkeypatch):
    path = code_point_cache.cache_path()
    assert path is not None and path.parent.name == "__pycache__"
    assert path.parent.parent == Path(encoder.__file__).parent
    assert path == code_point_cache.cache_path()  # stable within a process
    # another Unicode database (or Python, or tokeniser source): another file
    monkeypatch.setattr(code_point_cache.unicodedata, "unidata_version", "0.0.0")
    assert code_point_cache.cache_path() != path


def test_a_read_only_install_builds_the_table_and_writes_nothing(tmp_path, monkeypatch):
    """A pod's read-only root filesystem (Pod Security "restricted", infra/k8s): every
    write and the clean-up of the partial file fail with EROFS; the table is still the
    classifier's, built in this process."""
    import errno

    cache = tmp_path / "__pycache__" / "code_point_classes.test.npy"

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Path, "mkdir", read_only)
    monkeypatch.setattr(Path, "unlink", read_only)
    table = code_point_cache.load_or_build(cache)
    assert np.array_equal(table, encoder.classify_code_points())
    assert not cache.parent.exists()
