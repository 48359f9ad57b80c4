"""The order the suite's files go to the workers (tests/scheduling.py): longest first."""

from __future__ import annotations

import json
from dataclasses import dataclass

from tests import scheduling


@dataclass
class _Item:
    nodeid: str


def _ids(items: list[_Item]) -> list[str]:
    return [i.nodeid for i in items]


def test_files_go_longest_first_and_a_file_keeps_its_order() -> None:
    items = [
        _Item("tests/a.py::t1"),
        _Item("tests/a.py::t2"),
        _Item("tests/b.py::t1"),
        _Item("tests/c.py::t1"),
        _Item("tests/b.py::t2"),
    ]
    seconds = {"tests/a.py": 5.0, "tests/b.py": 300.0, "tests/c.py": 20.0}
    scheduling.order_longest_first(items, seconds)  # type: ignore[arg-type]
    assert _ids(items) == [
        "tests/b.py::t1",
        "tests/b.py::t2",
        "tests/c.py::t1",
        "tests/a.py::t1",
        "tests/a.py::t2",
    ]


def test_a_new_file_goes_after_the_long_ones_and_before_the_short_ones() -> None:
    items = [_Item("tests/short.py::t"), _Item("tests/new.py::t"), _Item("tests/long.py::t")]
    seconds = {"tests/short.py": 3.0, "tests/long.py": 400.0}
    scheduling.order_longest_first(items, seconds)  # type: ignore[arg-type]
    assert _ids(items) == ["tests/long.py::t", "tests/new.py::t", "tests/short.py::t"]


def test_the_checked_in_durations_name_files_that_exist() -> None:
    """A renamed or deleted file's seconds would order nothing: the table is refreshed with
    ``pytest --store-durations`` after a whole run."""
    listed = json.loads(scheduling.DURATIONS.read_text())
    root = scheduling.DURATIONS.parents[1]
    assert listed and all(v >= 0 for v in listed.values())
    assert [f for f in listed if not (root / f).is_file()] == []
