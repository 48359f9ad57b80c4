"""Where the suite's CPU goes: each test's set-up, call and teardown in CPU seconds.

On 2 cores the suite is CPU-bound (``vmstat``: 1-3% idle through a whole run), so a test's
wall time says as much about what ran beside it as about the test. CPU seconds do not:
``pytest --cpu-report FILE`` puts each pytest process (each xdist worker) in a cgroup of its
own, which every process it starts stays in (Spark's JVMs and Python workers, Airflow,
Kafka, even after their parent exited), and reads the cgroup's CPU counter around every
phase of every test. What a session fixture left running (a broker) is counted to the tests
that ran on that worker after it. The report: a JSON row per test and phase, and the
heaviest files and set-ups printed at the end.

Needs a writable cgroup (root; cgroup v1's ``cpuacct`` or v2): without one the option says
so and the run goes on unmeasured.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path

import pytest

V1 = Path("/sys/fs/cgroup/cpuacct")
V2 = Path("/sys/fs/cgroup")
KEY = "cpu_seconds"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-report",
        default=None,
        metavar="FILE",
        help="write each test phase's CPU seconds (its cgroup's, children included) to FILE",
    )


class _Cgroup:
    """A cgroup holding this process (and so everything it starts) and its CPU counter."""

    def __init__(self, name: str) -> None:
        if (V1 / "cpuacct.usage").is_file():
            self.folder, self.counter = V1 / name, "cpuacct.usage"
        else:
            self.folder, self.counter = V2 / name, "cpu.stat"
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "cgroup.procs").write_text(str(os.getpid()))

    def seconds(self) -> float:
        text = (self.folder / self.counter).read_text()
        if self.counter == "cpu.stat":
            fields = dict(line.split() for line in text.splitlines())
            return int(fields["usage_usec"]) / 1e6
        return int(text) / 1e9


class CpuMeter:
    """On each pytest process that runs tests: each phase's CPU into the test's report."""

    def __init__(self, cgroup: _Cgroup) -> None:
        self.cgroup = cgroup

    def _measure(self, item: pytest.Item, phase: str) -> Generator[None, None, None]:
        before = self.cgroup.seconds()
        yield
        item.user_properties.append((KEY, (phase, round(self.cgroup.seconds() - before, 2))))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        yield from self._measure(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        yield from self._measure(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        yield from self._measure(item, "teardown")


class CpuReport:
    """Where the reports arrive (xdist's controller, or the one process): the file and a
    summary of the heaviest files and set-ups."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, object]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == KEY and isinstance(value, tuple) and value[0] == report.when:
                self.rows.append(
                    {
                        "test": report.nodeid,
                        "phase": report.when,
                        "cpu_s": value[1],
                        "wall_s": round(report.duration, 2),
                    }
                )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.rows:
            return
        self.path.write_text("[\n" + ",\n".join(json.dumps(r) for r in self.rows) + "\n]\n")
        files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for row in self.rows:
            name = str(row["test"]).split("::", 1)[0]
            files[name][0] += float(row["cpu_s"])  # type: ignore[arg-type]
            files[name][1] += float(row["wall_s"])  # type: ignore[arg-type]
        total = sum(cpu for cpu, _ in files.values())
        write = terminalreporter.write_line
        write(f"\nCPU seconds by file (cgroups; {total:,.0f} s in all; {self.path}):")
        for name, (cpu, wall) in sorted(files.items(), key=lambda kv: -kv[1][0])[:25]:
            write(f"{cpu:9.0f} cpu {wall:7.0f} wall  {name}")
        setups = sorted(
            (r for r in self.rows if r["phase"] == "setup"),
            key=lambda r: -float(r["cpu_s"]),  # type: ignore[arg-type]
        )
        write("heaviest set-ups (the fixtures a test is the first to ask for):")
        for row in setups[:12]:
            write(f"{float(row['cpu_s']):9.0f} cpu {float(row['wall_s']):7.0f} wall  {row['test']}")  # type: ignore[arg-type]


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--cpu-report")
    if not path:
        return
    worker = getattr(config, "workerinput", {}).get("workerid")
    # under xdist the workers run the tests (and are measured); else this one process does
    distributed = bool(getattr(config.option, "numprocesses", None))
    if worker is not None or not distributed:
        try:
            cgroup = _Cgroup(f"s3tm-tests/{worker or 'main'}-{os.getpid()}")
        except OSError as error:
            print(f"--cpu-report: no cgroup to measure in ({error}); the run is not measured")
            return
        config.pluginmanager.register(CpuMeter(cgroup), "s3tm-cpu-meter")
    if worker is None:
        config.pluginmanager.register(CpuReport(Path(path)), "s3tm-cpu-report")
