"""``s3tm airflow``: the Airflow UI on the embedded default, ready to run the DAGs.

Starts Airflow's components as ``airflow standalone`` does (the metadata database migrated,
then the API server + UI, scheduler, dag-processor and triggerer), with everything the demo
used: only the project's DAGs, ``spark_default`` = ``local[*]``, the demo's lakehouse and
landing folders, this virtualenv on ``PATH`` (the Spark tasks spawn ``spark-submit`` from
it), and an admin login whose password is printed. The metadata database is SQLite under the
Airflow home unless ``--database-url`` names another (PostgreSQL, with the LocalExecutor: the
production setting, docs in README "Airflow").

The API server starts first and alone: with ``--port 0`` it binds a port of its own choosing,
which is read back from the line uvicorn prints, and only then do the scheduler and the task
runners start, with the execution API's URL on that port (``airflow standalone`` hands every
component the URL before anything binds, so its port has to be picked beforehand).
"""

from __future__ import annotations

import json
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from core.errors import InvalidArgumentError, S3TMError
from devtools.local.airflow.demo import REPO, airflow_env
from devtools.local.processes import stop_group
from spark_jobs.runtime.ports import require_free_port

ADMIN = "admin"
READY_TIMEOUT_S = 240
# under the Airflow home: every component's output, each line prefixed with its name
LOG_NAME = "components.log"
# started once the API server listens, in this order (as `airflow standalone` lists them)
COMPONENTS = ("scheduler", "dag-processor", "triggerer")
# uvicorn's start line, with the port it bound (the real one when asked for port 0)
_SERVING = re.compile(rb"Uvicorn running on https?://\S+?:(\d+) ")


class AirflowStartFailed(S3TMError):
    """An Airflow component exited or did not answer in time."""


def standalone_env(
    out: Path,
    *,
    port: int,
    host: str = "127.0.0.1",
    database_url: str | None = None,
    lakehouse: Path | None = None,
    landing: Path | None = None,
) -> dict[str, str]:
    """The environment of Airflow's components for the demo's folders under ``out``.
    ``port`` 0: the API server picks one; :func:`start` adds the URLs that name it."""
    out = out.resolve()
    home = out / "airflow"
    env = airflow_env(home, lakehouse or out / "lakehouse", landing or out / "landing")
    env.update(
        {
            "AIRFLOW__API__HOST": host,
            "AIRFLOW__API__PORT": str(port),
            # One admin user; its password is kept in (and read from) this file.
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file(home)),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            # Each Spark task takes the machine's cores; 32 idle workers (the default) only
            # take memory.
            "AIRFLOW__CORE__PARALLELISM": "4",
        }
    )
    if port:
        env.update(_served_at(host, port))
    if database_url:
        if not database_url.startswith(("postgresql", "mysql")):
            raise InvalidArgumentError(
                f"--database-url must be a PostgreSQL or MySQL SQLAlchemy URL: {database_url!r}"
            )
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = database_url
        env["AIRFLOW__CORE__EXECUTOR"] = "LocalExecutor"
    return env


def dag_schedules(dags_folder: Path | None = None) -> dict[str, str]:
    """Each project DAG's ``Schedule:`` line, read from its file's doc (no Airflow import):
    what the start-up message prints, from the text a test checks against the timetable."""
    import ast

    folder = dags_folder or REPO / "dags"
    schedules: dict[str, str] = {}
    for path in sorted(folder.glob("s3tm_*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        text = " ".join(doc.split())
        start = text.find("Schedule: ")
        said = text[start + len("Schedule: ") :] if start >= 0 else "?"
        schedules[path.stem] = said.split(". ", 1)[0]
    return schedules


def passwords_file(home: Path) -> Path:
    return home / "simple_auth_manager_passwords.json.generated"


def admin_password(home: Path) -> str:
    """The admin's password: the one Airflow keeps in its passwords file, made once."""
    path = passwords_file(home)
    known = json.loads(path.read_text()) if path.is_file() else {}
    if not known.get(ADMIN):
        known[ADMIN] = secrets.token_urlsafe(12)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known))
        path.chmod(0o600)
    return str(known[ADMIN])


def _served_at(host: str, port: int) -> dict[str, str]:
    """The settings that name the API server's address: the UI's base URL, and the
    execution API the task runners call."""
    base_url = f"http://{host}:{port}"
    return {
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base_url,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
    }


def served_port(line: bytes) -> int | None:
    """The port in the API server's "Uvicorn running on http://HOST:PORT" line, else None."""
    found = _SERVING.search(line)
    return int(found.group(1)) if found else None


@dataclass
class RunningAirflow:
    """Airflow's components as :func:`start` left them: the API server leads their process
    group (stopping it stops them all), each one's output goes to ``log_path``, prefixed
    with its name."""

    api_server: subprocess.Popen[bytes]
    base_url: str
    log_path: Path
    components: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def _first_exit(self) -> tuple[str, int] | None:
        for name, process in {"api-server": self.api_server, **self.components}.items():
            if process.poll() is not None:
                return name, process.returncode
        return None

    def exited(self) -> str | None:
        """Which component has exited, and how (None: all run)."""
        found = self._first_exit()
        return None if found is None else f"{found[0]} exited with code {found[1]}"

    def wait(self, poll_s: float = 1.0) -> int:
        """Block until a component exits; its exit code (non-zero: it failed)."""
        while (found := self._first_exit()) is None:
            time.sleep(poll_s)
        return found[1]


class _Log:
    """Lines from several processes into one file, each prefixed with its process' name
    (what ``airflow standalone`` prints)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("ab", buffering=0)
        self._lock = threading.Lock()

    def write(self, name: str, line: bytes) -> None:
        with self._lock:
            self._file.write(name.ljust(13).encode() + b" | " + line.rstrip(b"\n") + b"\n")

    def follow(
        self, name: str, stream: IO[bytes], on_line: Callable[[bytes], None] | None = None
    ) -> None:
        """Copies ``stream`` into the log on a thread until it ends (and hands each line to
        ``on_line``)."""

        def copy() -> None:
            for line in stream:
                self.write(name, line)
                if on_line is not None:
                    on_line(line)

        threading.Thread(target=copy, name=f"airflow-{name}-log", daemon=True).start()

    def tail(self, lines: int = 20) -> str:
        text = self.path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def _airflow_binary() -> Path:
    airflow = Path(sys.executable).with_name("airflow")
    if not airflow.exists():
        raise AirflowStartFailed(f"{airflow} is missing: run `make setup` first")
    return airflow


def _migrate(airflow: Path, env: dict[str, str], log: _Log) -> None:
    """``airflow db migrate``: the tables made or brought up to date, the default pool made
    (what ``airflow standalone`` does before it starts anything)."""
    done = subprocess.run(
        [str(airflow), "db", "migrate"], env=env, capture_output=True, timeout=READY_TIMEOUT_S
    )
    for line in (done.stdout + done.stderr).splitlines():
        log.write("db migrate", line)
    if done.returncode != 0:
        raise AirflowStartFailed(
            f"`airflow db migrate` exited with code {done.returncode}:\n{log.tail()}"
        )


def _start_api_server(
    airflow: Path, env: dict[str, str], log: _Log, host: str, port: int
) -> tuple[subprocess.Popen[bytes], int]:
    """The API server, leader of a new process group; returns it and the port it bound.
    (With port 0, ``env`` names no base URL: the UI and the login use the request's.)"""
    process = subprocess.Popen(
        [str(airflow), "api-server", "--host", host, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # a process group of its own (in this session, so that the components can join
        # it): a Ctrl-C reaches this command only, which stops the group
        process_group=0,
    )
    assert process.stdout is not None
    bound: list[int] = []
    found = threading.Event()

    def read_port(line: bytes) -> None:
        if not found.is_set() and (served := served_port(line)) is not None:
            bound.append(served)
            found.set()

    log.follow("api-server", process.stdout, read_port)
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        while not found.wait(timeout=0.5):
            if process.poll() is not None:
                raise AirflowStartFailed(
                    f"the API server exited with code {process.returncode} before it "
                    f"listened (a port in use?):\n{log.tail()}"
                )
            if time.monotonic() > deadline:
                raise AirflowStartFailed(
                    f"the API server did not say where it listens in {READY_TIMEOUT_S}s; "
                    f"see {log.path}"
                )
    except BaseException:
        stop_group(process, timeout_s=30)
        raise
    return process, bound[0]


def start(
    env: dict[str, str], log_path: Path, *, host: str = "127.0.0.1", port: int = 0
) -> RunningAirflow:
    """Migrates the metadata database, starts the API server (``port`` 0: it picks one), then
    the scheduler, dag-processor and triggerer pointed at the port it bound. Their output is
    appended to ``log_path``. Use :func:`wait_until_ready`, then :func:`stop`.

    Raises:
        AirflowStartFailed: the binary is missing, or the migration or API server failed.
    """
    airflow = _airflow_binary()
    log = _Log(log_path)
    _migrate(airflow, env, log)
    api_server, bound = _start_api_server(airflow, env, log, host, port)
    component_env = {**env, **_served_at(host, bound)}
    running = RunningAirflow(api_server, component_env["AIRFLOW__API__BASE_URL"], log_path)
    try:
        for name in COMPONENTS:
            # no log server (ports 8793 and 8794, on every interface): the API server
            # reads the task logs from this machine's Airflow home
            serve_logs = ["--skip-serve-logs"] if name in ("scheduler", "triggerer") else []
            process = subprocess.Popen(
                [str(airflow), name, *serve_logs],
                env=component_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                process_group=api_server.pid,  # one group: stopping the server stops all
            )
            assert process.stdout is not None
            log.follow(name, process.stdout)
            running.components[name] = process
    except BaseException:
        stop(running)
        raise
    return running


def wait_until_ready(running: RunningAirflow, password: str) -> None:
    """Polls the health endpoint until the API server and the scheduler answer, then the
    DAG list until it holds every project DAG (the dag-processor has parsed them: a DAG
    triggered before that is "not found").

    Raises:
        AirflowStartFailed: when a component exits or it is not ready in time.
    """
    from devtools.local.airflow.api import AirflowApi, AirflowApiError

    expected = set(dag_schedules())
    deadline = time.monotonic() + READY_TIMEOUT_S
    api: AirflowApi | None = None
    listed: set[str] = set()
    while time.monotonic() < deadline:
        if (exited := running.exited()) is not None:
            raise AirflowStartFailed(f"Airflow's {exited}; see {running.log_path}")
        try:
            if api is None:
                with urllib.request.urlopen(
                    f"{running.base_url}/api/v2/monitor/health", timeout=3
                ) as r:
                    health = json.loads(r.read())
                if health.get("scheduler", {}).get("status") == "healthy":
                    api = AirflowApi(running.base_url, password)
            if api is not None:
                listed = set(api.dag_ids())
                if expected <= listed:
                    return
        except (OSError, ValueError, urllib.error.URLError, AirflowApiError):
            pass
        time.sleep(2)
    missing = f"; DAGs not parsed yet: {sorted(expected - listed)}" if api is not None else ""
    raise AirflowStartFailed(
        f"Airflow was not ready at {running.base_url} in {READY_TIMEOUT_S}s{missing}; "
        f"see {running.log_path}"
    )


def stop(running: RunningAirflow, timeout: float = 60) -> None:
    """SIGTERM to the whole process group (the API server and every component), wait for
    all of them, then SIGKILL what is left."""
    stop_group(running.api_server, timeout_s=timeout)


def _without_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(
    out: Path,
    *,
    port: int,
    host: str,
    database_url: str | None,
) -> int:
    if port:
        require_free_port(host, port, "another Airflow? stop it or pass --port")
    env = standalone_env(out, port=port, host=host, database_url=database_url)
    home = Path(env["AIRFLOW_HOME"])
    landing = Path(env["S3TM_LANDING"])
    landing.mkdir(parents=True, exist_ok=True)
    password = admin_password(home)
    log_path = home / LOG_NAME
    database = (
        _without_password(database_url) if database_url else f"SQLite at {home / 'airflow.db'}"
    )
    print(f"Starting Airflow (metadata database: {database}; log: {log_path}) ...", flush=True)
    # `kill` (SIGTERM) stops Airflow's whole process group too, as Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    running: RunningAirflow | None = None
    try:
        running = start(env, log_path, host=host, port=port)
        wait_until_ready(running, password)
        dags = "".join(f"\n    {dag}: {when}" for dag, when in dag_schedules().items())
        print(
            f"\nAirflow is up: {running.base_url}\n"
            f"  log in as {ADMIN!r} with password {password!r}\n"
            f"  DAGs (unpaused; each runs at its next slot, or when you press Trigger):{dags}\n"
            f"  landing: {landing}; lakehouse: {env['S3TM_LAKEHOUSE']}; Spark: local[*]\n"
            "Press Ctrl-C to stop.",
            flush=True,
        )
        code = running.wait()
        print(f"Airflow's {running.exited()}; stopping the rest (log: {log_path})", flush=True)
        return code or 1
    except KeyboardInterrupt:
        print("\nstopping Airflow ...", flush=True)
        return 0
    finally:
        # a second Ctrl-C or SIGTERM (`timeout` forwards one too) must not cut the stop short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if running is not None:
            stop(running)
