"""An S3-compatible server on loopback (moto's, from PyPI): what compose's ``minio``
service gives the platform (conditional puts and all that delta-rs, pyarrow and S3A use)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import InputDataError

START_TIMEOUT_S = 60.0
# moto accepts any credentials; these are what the processes are given
ACCESS_KEY, SECRET_KEY, REGION = "s3tm-local", "s3tm-local-secret", "us-east-1"


@dataclass
class LocalS3:
    """moto's server; ``port`` 0 (the default): the server binds a port of its choosing and
    says which (read back from its output: a port picked free here could be taken before
    the server binds it). ``log``: where its output goes (default: a temporary file)."""

    port: int = 0
    log: Path | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The variables every engine reads the endpoint and credentials from (the names
        compose and Kubernetes set)."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }

    def start(self) -> str:
        """Starts the server on loopback; returns its endpoint once it answers.

        Raises:
            InputDataError: moto's server is missing, exited, or did not answer in time
                (with its last output).
        """
        if self.log is None:
            handle, name = tempfile.mkstemp(prefix="s3tm-moto-", suffix=".log")
            os.close(handle)
            self.log = Path(name)
        with self.log.open("wb") as out:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            bound = re.search(r"Running on http://127\.0\.0\.1:(\d+)", self._output())
            if bound:
                self.port = int(bound.group(1))
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return self.endpoint
                except OSError:
                    pass
            if self._process.poll() is not None or time.monotonic() > deadline:
                output = self._output()[-1500:]
                self.stop()
                raise InputDataError(
                    f"the S3 server (moto.server) did not start in {START_TIMEOUT_S:.0f} s "
                    f"(run `make setup` if it is missing); its output: {output}"
                )
            time.sleep(0.2)

    def _output(self) -> str:
        return self.log.read_text(errors="replace") if self.log and self.log.exists() else ""

    def create_bucket(self, bucket: str) -> None:
        import pyarrow.fs as pafs

        store = pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            region=REGION,
            endpoint_override=self.endpoint,
            scheme="http",
            allow_bucket_creation=True,
        )
        store.create_dir(bucket)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=30)
        self._process = None
