"""The order test files go to pytest-xdist's workers: the longest first.

``--dist loadfile`` hands whole files to the two workers as they free up; by default
pytest-xdist queues the files with the most tests first, which puts the long single-test
files (the cluster demo, the monitor's loop, the kill-point tests) last, on one worker,
while the other idles. Queued longest first (LPT), the workers finish together.

The seconds per file come from a whole run (``tests/durations.json``, written by
``pytest --store-durations``: setup, call and teardown of every test, summed per file). A
file that is not listed yet (a new one) goes first among files of unknown length, right
after the files listed as longer than a minute: it may be slow, and it is not left last.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
# a new file is queued as if it took this long (after the known long files, before the rest)
UNKNOWN_FILE_SECONDS = 60.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-durations",
        action="store_true",
        default=False,
        help="write each test file's seconds (setup + call + teardown) to tests/durations.json",
    )


def file_seconds() -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def order_longest_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Sorts ``items`` in place: files by their seconds, longest first; a file's tests keep
    their order (module fixtures are built once)."""
    first_seen: dict[str, int] = {}
    for k, item in enumerate(items):
        first_seen.setdefault(_file_of(item.nodeid), k)

    def key(item: pytest.Item) -> tuple[float, int]:
        name = _file_of(item.nodeid)
        return (-seconds.get(name, UNKNOWN_FILE_SECONDS), first_seen[name])

    items.sort(key=key)  # stable: the tests of a file stay in collection order


class DurationRecorder:
    """Sums each file's test seconds from the reports (on xdist's controller, every
    worker's reports arrive here) and writes them at the end of a whole run."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[_file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput") or not self.seconds:
            return  # a worker: the controller writes
        ranked = dict(sorted(self.seconds.items(), key=lambda kv: -kv[1]))
        DURATIONS.write_text(
            json.dumps({k: round(v, 1) for k, v in ranked.items()}, indent=1) + "\n"
        )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--store-durations"):
        config.pluginmanager.register(DurationRecorder(), "s3tm-durations")
