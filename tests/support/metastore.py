"""A Hive Metastore on loopback for a test: ``s3tm metastore``'s server
(``spark_jobs.lake.metastore``) on a free port, its database under a folder; what a team's
catalog is to the platform (``S3TM_CATALOG_URI``)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from core.errors import S3TMError
from devtools.local.processes import stop_group
from spark_jobs.lake.metastore import MetastoreConfig, command, listening

START_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def hive_metastore(folder: Path, environ: Mapping[str, str] | None = None) -> Iterator[str]:
    """A running metastore; yields its ``thrift://127.0.0.1:PORT``. ``environ``: its
    variables (an S3 server's endpoint and keys), default this process's. Its log:
    ``folder/metastore.log``."""
    folder.mkdir(parents=True, exist_ok=True)
    config = MetastoreConfig(folder=folder, port=_free_port())
    env = dict(os.environ if environ is None else environ)
    log_path = folder / "metastore.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        command(config, env),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not listening("127.0.0.1", config.port):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                raise S3TMError(f"the metastore did not start on port {config.port}:\n{tail}")
            time.sleep(0.5)
        yield f"thrift://127.0.0.1:{config.port}"
    finally:
        stop_group(process, timeout_s=30)  # started in a session of its own
        log.close()
