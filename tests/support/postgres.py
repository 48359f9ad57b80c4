"""A throw-away PostgreSQL server from Debian's server binaries (package ``postgresql``):
the metadata database compose's ``postgres`` service gives Airflow. It listens on a Unix
socket in its own folder only, no TCP port: nothing to pick beforehand that another
process could take first, and nothing another user of the machine can reach."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from core.errors import InputDataError


def server_binaries() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin``, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    return found[-1] if found else None


@dataclass
class LocalPostgres:
    """One cluster with database ``airflow`` owned by user ``airflow`` (trust on its socket).

    Its data and socket live in a fresh temporary folder (not under a private parent: as
    root, the server runs as the ``postgres`` user, which must reach it)."""

    base: Path | None = None

    @property
    def url(self) -> str:
        """The SQLAlchemy URL: psycopg2 reads a ``host`` that is a folder as the socket's."""
        if self.base is None:
            raise InputDataError("PostgreSQL is not started")
        return f"postgresql+psycopg2://airflow@/airflow?host={self.base}"

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
             f"-k {self.base} -c listen_addresses=''", "-w", "start"],
            [str(bins / "createdb"), "-h", str(self.base), "-U", "airflow", "airflow"],
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
