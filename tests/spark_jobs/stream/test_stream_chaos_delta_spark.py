"""The stream's kill points (test_stream_chaos.py) with delta-spark committing the outputs."""

from __future__ import annotations

import pytest

from tests.spark_jobs.stream.test_stream_chaos import HALVES, killed_at_every_point


@pytest.mark.parametrize("part", HALVES)
def test_stream_killed_at_every_point_restarts_exactly_with_delta_spark(lakehouse, tmp_path, part):
    killed_at_every_point(lakehouse, tmp_path, "spark", part)
