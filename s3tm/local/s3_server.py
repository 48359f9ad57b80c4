"""An S3-compatible server on loopback (moto's, from PyPI): what compose's ``minio``
service gives the platform (conditional puts and all that delta-rs, pyarrow and S3A use)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from core.errors import InputDataError
from s3tm.local.kafka_broker import free_port

START_TIMEOUT_S = 60.0
# moto accepts any credentials; these are what the processes are given
ACCESS_KEY, SECRET_KEY, REGION = "s3tm-local", "s3tm-local-secret", "us-east-1"


@dataclass
class LocalS3:
    port: int = field(default_factory=free_port)
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
        """Starts the server; returns its endpoint.

        Raises:
            InputDataError: moto's server is missing or did not answer.
        """
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self.endpoint
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise InputDataError(
                        "the S3 server (moto.server) did not start: run `make setup`"
                    ) from None
                time.sleep(0.2)

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
