"""Prometheus on loopback (Debian's ``prometheus`` package): what compose's ``prometheus``
service runs, as a local process scraping ``s3tm metrics serve`` with the project's alert
rules (``infra/monitoring/s3tm-alerts.yml``). Its HTTP API answers queries and lists the
alerts its own rule evaluation fires."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import InputDataError
from devtools.local.processes import stop_group

RULES = Path(__file__).resolve().parents[2] / "infra" / "monitoring" / "s3tm-alerts.yml"
START_TIMEOUT_S = 60.0


def binary() -> str:
    """The ``prometheus`` executable.

    Raises:
        InputDataError: when it is not installed (Debian package ``prometheus``)."""
    found = shutil.which("prometheus")
    if found is None:
        raise InputDataError(
            "prometheus is not installed: `apt-get install prometheus` (Debian's package; "
            ".ci/run installs it)"
        )
    return found


# "Listening on" address=127.0.0.1:PORT: the port the server bound
_LISTENING = re.compile(r'msg="Listening on" address=127\.0\.0\.1:(\d+)')


@dataclass
class LocalPrometheus:
    """A Prometheus server in ``folder`` (config, data, log) scraping ``targets``
    (``host:port`` of exporters, job ``s3tm``) every ``scrape_seconds`` and evaluating
    ``rule_files`` every ``evaluation_seconds``."""

    folder: Path
    targets: Sequence[str]
    rule_files: Sequence[Path] = (RULES,)
    scrape_seconds: float = 15.0
    evaluation_seconds: float = 15.0
    port: int = 0
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "prometheus.log"

    def config(self) -> dict[str, Any]:
        return {
            "global": {
                "scrape_interval": f"{self.scrape_seconds:g}s",
                "evaluation_interval": f"{self.evaluation_seconds:g}s",
            },
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [
                {"job_name": "s3tm-metrics", "static_configs": [{"targets": list(self.targets)}]}
            ],
        }

    def start(self) -> str:
        """Starts the server on a loopback port; returns its URL once it is ready.

        Raises:
            InputDataError: prometheus is missing, exited, or was not ready in time (with
                the end of its log).
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "prometheus.yml"
        # JSON is YAML: no YAML writer needed
        config.write_text(json.dumps(self.config(), indent=1))
        # the server binds a port of its choosing (0) and logs it: no port picked beforehand
        # (another process could take it in between), unless one was asked for
        start = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self._process = subprocess.Popen(
                [
                    binary(),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.enable-lifecycle",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if self._wait_ready(start):
            return self.url
        tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
        self.stop()
        raise InputDataError(f"prometheus did not start on 127.0.0.1: {tail}")

    def _bound_port(self, start: int) -> int | None:
        """The port this start's log says the server listens on."""
        with self.log.open("rb") as log:
            log.seek(start)
            found = _LISTENING.search(log.read().decode(errors="replace"))
        return int(found.group(1)) if found else None

    def _wait_ready(self, start: int) -> bool:
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            bound = self._bound_port(start)
            if bound:
                self.port = bound
                try:
                    with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                        if response.status == 200:
                            return True
                except (urllib.error.URLError, OSError):
                    pass
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        if self._process is not None:
            stop_group(self._process, timeout_s=30)
            self._process = None

    # -- the HTTP API ----------------------------------------------------------------------
    def _get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as response:
            body = json.loads(response.read())
        if body.get("status") != "success":
            raise InputDataError(f"prometheus {path}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result: ``[{"metric": {...}, "value": [t, "v"]}, ...]``.

        Raises:
            InputDataError: the expression does not parse or fails (Prometheus' error)."""
        try:
            data = self._get("/api/v1/query", query=expr)
        except urllib.error.HTTPError as error:  # 400: a bad expression, with the reason
            raise InputDataError(f"prometheus query {expr!r}: {error.read().decode()}") from error
        result: list[dict[str, Any]] = data["result"]
        return result

    def value(self, expr: str) -> float | None:
        """The single value of ``expr`` now (None: no series)."""
        result = self.query(expr)
        if not result:
            return None
        if len(result) > 1:
            raise InputDataError(f"prometheus query {expr!r} returned {len(result)} series")
        return float(result[0]["value"][1])

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts Prometheus' rule evaluation holds (pending or firing)."""
        alerts: list[dict[str, Any]] = self._get("/api/v1/alerts")["alerts"]
        return alerts

    def targets_up(self) -> list[dict[str, Any]]:
        targets: list[dict[str, Any]] = self._get("/api/v1/targets")["activeTargets"]
        return targets
