"""``s3tm airflow``: the Airflow UI on the embedded default, ready to run the DAGs.

Starts ``airflow standalone`` (API server + UI, scheduler, dag-processor, triggerer) with
everything the demo used: only the project's DAGs, ``spark_default`` = ``local[*]``, the
demo's lakehouse and landing folders, this virtualenv on ``PATH`` (standalone spawns
``airflow`` and the Spark tasks spawn ``spark-submit`` from it), and an admin login whose
password is printed. The metadata database is SQLite under the Airflow home unless
``--database-url`` names another (PostgreSQL, with the LocalExecutor: the production
setting, docs in README "Airflow").
"""

from __future__ import annotations

import json
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from core.errors import InvalidArgumentError, S3TMError
from s3tm.local.processes import stop_group
from s3tm.orchestration.airflow_demo import REPO, airflow_env

ADMIN = "admin"
READY_TIMEOUT_S = 240


class AirflowStartFailed(S3TMError):
    """Airflow standalone exited or did not answer in time."""


def standalone_env(
    out: Path,
    *,
    port: int,
    host: str = "127.0.0.1",
    database_url: str | None = None,
    lakehouse: Path | None = None,
    landing: Path | None = None,
) -> dict[str, str]:
    """The environment of ``airflow standalone`` for the demo's folders under ``out``."""
    out = out.resolve()
    home = out / "airflow"
    env = airflow_env(home, lakehouse or out / "lakehouse", landing or out / "landing")
    env.update(
        {
            "AIRFLOW__API__HOST": host,
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": f"http://{host}:{port}",
            # One admin user; its password is kept in (and read from) this file.
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file(home)),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            # Each Spark task takes the machine's cores; 32 idle workers (the default) only
            # take memory.
            "AIRFLOW__CORE__PARALLELISM": "4",
        }
    )
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


def wait_until_ready(base_url: str, process: subprocess.Popen[bytes] | None = None) -> None:
    """Polls the health endpoint until the API server, scheduler and dag-processor answer.

    Raises:
        AirflowStartFailed: when the process exits or nothing answers in time.
    """
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AirflowStartFailed(f"airflow standalone exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{base_url}/api/v2/monitor/health", timeout=3) as r:
                health = json.loads(r.read())
            if health.get("scheduler", {}).get("status") == "healthy":
                return
        except (OSError, ValueError, urllib.error.URLError):
            pass
        time.sleep(2)
    raise AirflowStartFailed(f"Airflow did not answer at {base_url} in {READY_TIMEOUT_S}s")


def start(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """``airflow standalone`` in its own process group, its output appended to ``log_path``."""
    airflow = Path(sys.executable).with_name("airflow")
    if not airflow.exists():
        raise AirflowStartFailed(f"{airflow} is missing: run `make setup` first")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [str(airflow), "standalone"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """SIGTERM to the whole process group (standalone and its components), wait for all of
    them (a component can outlive standalone), then SIGKILL what is left."""
    stop_group(process, timeout_s=timeout)


def _without_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _check_port_free(host: str, port: int) -> None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as err:
            raise InvalidArgumentError(
                f"{host}:{port} is in use (another Airflow?): stop it or pass --port"
            ) from err


def run(
    out: Path,
    *,
    port: int,
    host: str,
    database_url: str | None,
) -> int:
    _check_port_free(host, port)
    env = standalone_env(out, port=port, host=host, database_url=database_url)
    home = Path(env["AIRFLOW_HOME"])
    landing = Path(env["S3TM_LANDING"])
    landing.mkdir(parents=True, exist_ok=True)
    password = admin_password(home)
    log_path = home / "standalone.log"
    base_url = env["AIRFLOW__API__BASE_URL"]
    database = (
        _without_password(database_url) if database_url else f"SQLite at {home / 'airflow.db'}"
    )
    print(f"Starting Airflow (metadata database: {database}; log: {log_path}) ...", flush=True)
    process = start(env, log_path)
    # `kill` (SIGTERM) stops Airflow's whole process group too, as Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        wait_until_ready(base_url, process)
        dags = "".join(f"\n    {dag}: {when}" for dag, when in dag_schedules().items())
        print(
            f"\nAirflow is up: {base_url}\n"
            f"  log in as {ADMIN!r} with password {password!r}\n"
            f"  DAGs (unpaused; each runs at its next slot, or when you press Trigger):{dags}\n"
            f"  landing: {landing}; lakehouse: {env['S3TM_LAKEHOUSE']}; Spark: local[*]\n"
            "Press Ctrl-C to stop.",
            flush=True,
        )
        return process.wait()
    except KeyboardInterrupt:
        print("\nstopping Airflow ...", flush=True)
        return 0
    finally:
        stop(process)
