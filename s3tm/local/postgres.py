"""A throw-away PostgreSQL server on loopback from Debian's server binaries (package
``postgresql``): the metadata database compose's ``postgres`` service gives Airflow."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import InputDataError
from s3tm.local.kafka_broker import free_port


def server_binaries() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin``, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    return found[-1] if found else None


@dataclass
class LocalPostgres:
    """One cluster with database ``airflow`` owned by user ``airflow`` (trust on loopback).

    Its data lives in a fresh temporary folder (not under a private parent: as root, the
    server runs as the ``postgres`` user, which must reach it)."""

    port: int = field(default_factory=free_port)
    base: Path | None = None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://airflow@127.0.0.1:{self.port}/airflow"

    def _as_server_user(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def start(self) -> str:
        """initdb, start, create the database; returns its SQLAlchemy URL.

        Raises:
            InputDataError: the server binaries are missing, or a step failed.
        """
        bins = server_binaries()
        if bins is None:
            raise InputDataError(
                "PostgreSQL's server is not installed: apt-get install postgresql "
                "(.ci/run installs it)"
            )
        self.base = Path(tempfile.mkdtemp(prefix="s3tm-pg-"))
        if os.geteuid() == 0:  # the server refuses to run as root
            shutil.chown(self.base, "postgres")
        data = self.base / "data"
        steps = [
            [*self._as_server_user(), str(bins / "initdb"), "-D", str(data), "-U", "airflow",
             "-A", "trust"],
            [*self._as_server_user(), str(bins / "pg_ctl"), "-D", str(data), "-l",
             str(self.base / "log"), "-o",
             f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1", "-w", "start"],
            [str(bins / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "airflow",
             "airflow"],
        ]  # fmt: skip
        for argv in steps:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                self.stop()
                raise InputDataError(f"PostgreSQL: {argv[-1]!r} failed: {done.stderr[-1500:]}")
        return self.url

    def stop(self) -> None:
        bins = server_binaries()
        if self.base is None or bins is None:
            return
        subprocess.run(
            [*self._as_server_user(), str(bins / "pg_ctl"), "-D", str(self.base / "data"),
             "-m", "fast", "stop"],
            check=False,
            capture_output=True,
        )  # fmt: skip
        shutil.rmtree(self.base, ignore_errors=True)
        self.base = None
