"""A client of Airflow's REST API (``/auth/token``, ``/api/v2``: what the UI calls), as the
admin user of ``s3tm airflow``: trigger a DAG run and wait for it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from core.errors import S3TMError

RUN_TIMEOUT_S = 900


class AirflowApiError(S3TMError):
    """Airflow answered with an error, or a run did not end in time."""


class AirflowApi:
    """The REST API the UI uses, logged in as ``username``."""

    def __init__(self, base_url: str, password: str, username: str = "admin") -> None:
        self.base_url = base_url
        self.token = ""
        token = self._call("POST", "/auth/token", {"username": username, "password": password})
        self.token = str(token["access_token"])

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        conflict_ok: bool = False,
    ) -> Any:
        """One REST call, retried as a user retries a click: on a loaded 2-core machine a
        call can time out or get a 500 while the scheduler and the first runs write (SQLite
        serialises every writer). Retried calls are idempotent (a trigger names its run id;
        a 409 for it means the earlier try created the run)."""
        attempts = 4
        for attempt in range(attempts):
            request = urllib.request.Request(
                self.base_url + path,
                data=None if body is None else json.dumps(body).encode(),
                method=method,
                headers={"Content-Type": "application/json"},
            )
            if self.token:
                request.add_header("Authorization", f"Bearer {self.token}")
            try:
                with urllib.request.urlopen(request, timeout=90) as response:
                    return json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as error:
                if error.code == 409 and conflict_ok and attempt > 0:
                    return body
                if error.code < 500 or attempt == attempts - 1:
                    raise AirflowApiError(
                        f"{method} {path}: HTTP {error.code} {error.read()[:500]!r}"
                    ) from error
            except (TimeoutError, urllib.error.URLError) as error:
                if attempt == attempts - 1:
                    raise AirflowApiError(f"{method} {path}: {error}") from error
            time.sleep(5)
        raise AssertionError("unreachable")

    def dag_ids(self) -> list[str]:
        return sorted(d["dag_id"] for d in self._call("GET", "/api/v2/dags")["dags"])

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        """Starts a run of ``dag_id`` (as Trigger in the UI); returns its run id."""
        run_id = f"manual__rest_{time.time_ns()}"
        run = self._call(
            "POST",
            f"/api/v2/dags/{dag_id}/dagRuns",
            {"dag_run_id": run_id, "logical_date": None, "conf": conf or {}},
            conflict_ok=True,
        )
        if run.get("dag_run_id") != run_id:
            raise AirflowApiError(f"triggering {dag_id} answered {run}")
        return run_id

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"])

    def wait_for(self, dag_id: str, run_id: str, timeout_s: float = RUN_TIMEOUT_S) -> str:
        """The run's end state (``success``, ``failed``), or ``timeout``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]
            if state in ("success", "failed"):
                return str(state)
            time.sleep(3)
        return "timeout"

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """A task try's whole log as the UI's log view gets it (JSON: the sources it was
        read from, then the lines)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
        return json.dumps(self._call("GET", path + "?full_content=true"))

    def failed_tasks(self, dag_id: str, run_id: str) -> list[str]:
        tasks = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        return [t["task_id"] for t in tasks["task_instances"] if t["state"] == "failed"]
