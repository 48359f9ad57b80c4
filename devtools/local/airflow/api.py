"""Airflow's REST API (``/api/v2``: what the UI calls) through Airflow's own Python client
(``apache-airflow-client``, released with the Airflow it talks to), logged in as a user of
the auth manager: the calls the demos and the tests make (list the DAGs, trigger a run and
wait for it, its failed tasks, a task's log). ``client`` is the logged-in
``airflow_client.client.ApiClient`` for any other call."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from core.errors import S3TMError

if TYPE_CHECKING:
    from airflow_client.client.models import DAGRunResponse

RUN_TIMEOUT_S = 900
# one call's wait for an answer, and its tries: on a loaded 2-core machine a call can time
# out or get a 5xx while the scheduler and the first runs write (SQLite serialises every
# writer), and a user clicks again
CALL_TIMEOUT_S = 90.0
CALL_TRIES = 4
RETRY_WAIT_S = 5.0


class AirflowApiError(S3TMError):
    """Airflow answered with an error (``status``: its HTTP status, None when it did not
    answer), or a run did not end in time."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def access_token(base_url: str, username: str, password: str) -> str:
    """A token of the auth manager's ``/auth/token`` (outside ``/api/v2``, so outside the
    client), tried as a call of the client is."""
    body = json.dumps({"username": username, "password": password}).encode()
    for attempt in range(CALL_TRIES):
        request = urllib.request.Request(
            f"{base_url}/auth/token",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=CALL_TIMEOUT_S) as answer:
                return str(json.load(answer)["access_token"])
        except urllib.error.HTTPError as error:
            if error.code < 500 or attempt == CALL_TRIES - 1:
                raise AirflowApiError(
                    f"POST /auth/token: HTTP {error.code} {error.read()[:500]!r}",
                    status=error.code,
                ) from error
        except (TimeoutError, urllib.error.URLError) as error:
            if attempt == CALL_TRIES - 1:
                raise AirflowApiError(f"POST /auth/token: {error}") from error
        time.sleep(RETRY_WAIT_S)
    raise AssertionError("unreachable")


class AirflowApi:
    """The REST API the UI uses, logged in as ``username``."""

    def __init__(self, base_url: str, password: str, username: str = "admin") -> None:
        import urllib3
        from airflow_client import client

        self.base_url = base_url
        self.token = access_token(base_url, username, password)
        configuration = client.Configuration(host=base_url, access_token=self.token)
        # every method tried again (a trigger names its run id, so a second try of one the
        # server made answers 409: see trigger), after a 5xx or a lost connection
        configuration.retries = urllib3.Retry(
            total=CALL_TRIES - 1,
            backoff_factor=RETRY_WAIT_S / 2,
            status_forcelist=(500, 502, 503, 504),
            allowed_methods=None,
            raise_on_status=False,
        )
        self.client = client.ApiClient(configuration)

    def _calling(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)`` with the call timeout; an error answer raised as an
        :class:`AirflowApiError` that says what was asked."""
        import urllib3
        from airflow_client.client.exceptions import ApiException

        try:
            return call(*args, _request_timeout=CALL_TIMEOUT_S, **kwargs)
        except ApiException as error:
            raise AirflowApiError(
                f"{what}: HTTP {error.status} {str(error.body)[:500]}", status=error.status
            ) from error
        except urllib3.exceptions.HTTPError as error:  # no answer after the tries
            raise AirflowApiError(f"{what}: {error}") from error

    def dag_ids(self) -> list[str]:
        from airflow_client.client import DAGApi

        dags = self._calling("listing the DAGs", DAGApi(self.client).get_dags, limit=1000)
        return sorted(d.dag_id for d in dags.dags)

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        """Starts a run of ``dag_id`` (as Trigger in the UI); returns its run id."""
        from airflow_client.client import DagRunApi
        from airflow_client.client.models import TriggerDAGRunPostBody

        run_id = f"manual__rest_{time.time_ns()}"
        body = TriggerDAGRunPostBody(dag_run_id=run_id, logical_date=None, conf=conf or {})
        runs = DagRunApi(self.client)
        try:
            run = self._calling(f"triggering {dag_id}", runs.trigger_dag_run, dag_id, body)
        except AirflowApiError as error:
            if error.status != 409:
                raise
            # the run id is this call's own: an earlier try of it made the run
            run = self._calling(f"run {run_id}", runs.get_dag_run, dag_id, run_id)
        return str(run.dag_run_id)

    def runs(self, dag_id: str) -> list[DAGRunResponse]:
        from airflow_client.client import DagRunApi

        listed = self._calling(
            f"runs of {dag_id}", DagRunApi(self.client).get_dag_runs, dag_id, limit=1000
        )
        return list(listed.dag_runs)

    def wait_for(self, dag_id: str, run_id: str, timeout_s: float = RUN_TIMEOUT_S) -> str:
        """The run's end state (``success``, ``failed``), or ``timeout``."""
        from airflow_client.client import DagRunApi

        runs = DagRunApi(self.client)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self._calling(f"run {run_id}", runs.get_dag_run, dag_id, run_id)
            state = str(run.state.value)
            if state in ("success", "failed"):
                return state
            time.sleep(3)
        return "timeout"

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        """Each task of the run and its state (``none`` while it has none)."""
        from airflow_client.client import TaskInstanceApi

        tasks = self._calling(
            f"tasks of run {run_id}",
            TaskInstanceApi(self.client).get_task_instances,
            dag_id,
            run_id,
            limit=1000,
        )
        return {
            t.task_id: str(t.state.value) if t.state is not None else "none"
            for t in tasks.task_instances
        }

    def failed_tasks(self, dag_id: str, run_id: str) -> list[str]:
        return [
            task for task, state in self.task_states(dag_id, run_id).items() if state == "failed"
        ]

    def task_log(
        self, dag_id: str, run_id: str, task_id: str, try_number: int = 1
    ) -> list[dict[str, Any]]:
        """A task try's whole log as the UI's log view gets it: its entries in order, the
        first saying where the log was read from (``sources``)."""
        from airflow_client.client import TaskInstanceApi

        log = self._calling(
            f"log of {task_id} in run {run_id}",
            TaskInstanceApi(self.client).get_log,
            dag_id,
            run_id,
            task_id,
            try_number,
            full_content=True,
        )
        entries = log.content.actual_instance
        return [e.to_dict() if hasattr(e, "to_dict") else {"event": str(e)} for e in entries]
