"""The replay producer: every line of a landing file goes out unchanged, keyed by post id,
on an absolute schedule at the requested rate."""

from __future__ import annotations

import gzip
import json

import pytest

from core.errors import InputDataError, InvalidArgumentError
from s3tm.produce.replay import landing_records, replay


def _corpus(tmp_path):
    lines = [
        json.dumps({"id": 7, "text": "storm warning"}).encode(),
        b"",  # blank: the stream quarantines it, the producer must still send it
        b"{not json",
        json.dumps({"id": "x9", "text": "cup final"}).encode(),
    ]
    path = tmp_path / "posts.jsonl.gz"
    with gzip.open(path, "wb") as out:
        out.write(b"\n".join(lines) + b"\n")
    return path, lines


def test_every_line_goes_out_unchanged_keyed_by_post_id(tmp_path):
    path, lines = _corpus(tmp_path)
    sent = []
    figures = replay(landing_records(path), lambda k, v: sent.append((k, v)))
    assert [v for _, v in sent] == lines
    assert [k for k, _ in sent] == [b"7", None, None, b"x9"]
    assert figures.records == 4
    with pytest.raises(InputDataError):
        list(landing_records(tmp_path / "missing.jsonl"))


def test_the_rate_is_held_on_an_absolute_schedule():
    now = [0.0]
    sends = []

    def clock() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    def send(key, value):
        sends.append(now[0])
        now[0] += 0.001  # each send costs 1 ms

    figures = replay(((None, b"x") for _ in range(1000)), send, rate=100.0, clock=clock,
                     sleep=sleep)  # fmt: skip
    assert sends[0] == 0.0 and sends[-1] == pytest.approx(9.99)
    assert all(t == pytest.approx(k / 100.0) for k, t in enumerate(sends))
    assert figures.rate == pytest.approx(100.0, rel=0.01)
    with pytest.raises(InvalidArgumentError):
        replay([], send, rate=-1)
