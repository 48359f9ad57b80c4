"""The matcher bases as files under the stream's checkpoint: what is written is read back
array for array, a missing one is a clear error, and a restarted stream clears the bases of
the runs before it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.errors import InputDataError
from core.stream.snapshot import MatcherSubs
from spark_jobs.stream.matcher_bases import FileBases, bases_root


def _subs(seed: int) -> MatcherSubs:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 4, size=50)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return MatcherSubs(
        np.arange(50, dtype=np.int64) * 3 + seed,
        indptr,
        rng.integers(0, 1000, size=int(indptr[-1])).astype(np.int32),
        rng.integers(0, 7, size=50).astype(np.int32),
    )


def test_a_base_reads_back_as_written_and_a_missing_one_says_which(tmp_path: Path) -> None:
    store = FileBases()
    location = f"{bases_root(str(tmp_path))}/owner/v1-e1"
    written = [_subs(m) for m in range(3)]
    store.write(location, written)
    for m, subs in enumerate(written):
        got = store.read(location, m)
        for field in ("sub_ids", "indptr", "word_ids", "subscriber_codes"):
            assert np.array_equal(getattr(got, field), getattr(subs, field))
            assert getattr(got, field).dtype == getattr(subs, field).dtype
    with pytest.raises(InputDataError, match="matcher 3's base is missing"):
        store.read(location, 3)
    store.remove(location)
    assert not Path(location).exists()


def test_a_restarted_stream_clears_the_bases_of_earlier_runs(tmp_path: Path) -> None:
    store = FileBases()
    root = bases_root(str(tmp_path))
    for owner in ("old", "new"):
        store.write(f"{root}/{owner}/v1-e1", [_subs(0)])
    store.remove_others(root, "new")
    assert sorted(p.name for p in Path(root).iterdir()) == ["new"]
    store.remove_others(str(tmp_path / "absent"), "new")  # nothing there: nothing to do
