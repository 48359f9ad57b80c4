"""Each step's peak memory: a reset starts a new peak, so a later step does not inherit an
earlier step's peak."""

from __future__ import annotations

import numpy as np
import psutil
import pytest

from spark_jobs.runtime.peak_rss import peak_mib, reset_peak


def test_a_reset_starts_a_new_peak():
    reset_peak()
    before = peak_mib()
    # the new peak is the resident memory now (psutil reads it from another file)
    now_mib = psutil.Process().memory_info().rss / 2**20
    assert before is not None and before == pytest.approx(now_mib, rel=0.1)
    block = np.ones(300 * 2**20 // 8)  # 300 MiB, touched
    peak = peak_mib()
    assert peak is not None and peak >= before + 250
    del block
    reset_peak()
    after = peak_mib()
    assert after is not None and after < peak - 200


def test_an_absent_process_has_no_peak():
    assert peak_mib(None) is None and peak_mib(2**31 - 1) is None
    reset_peak(None)
    reset_peak(2**31 - 1)  # nothing to reset: no error
