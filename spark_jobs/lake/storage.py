"""Where a lakehouse lives: a local folder or an object store (``s3://bucket/prefix``).

One root string names it. The three engines that touch its files spell object-store URIs
differently, and this module translates:

- delta-rs and pyarrow: ``s3://bucket/key`` (they read object stores natively);
- Spark: ``s3a://bucket/key`` (Hadoop's S3A connector, baked into the cluster image);
- a local root: an absolute path for all three.

Credentials never appear here or in any file: delta-rs, pyarrow and S3A read them from the
environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``,
``AWS_ENDPOINT_URL`` for MinIO or another S3-compatible store), which the deployment fills
from a Kubernetes Secret, a compose ``.env`` file or an Airflow connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from core.errors import InvalidArgumentError
from spark_jobs.settings import settings

if TYPE_CHECKING:
    import pyarrow.fs

# ``s3a`` is Spark's spelling of ``s3``; both name the same objects.
OBJECT_STORE_SCHEMES = ("s3", "s3a")
SPARK_SCHEME = {"s3": "s3a"}


def is_remote(location: str | Path) -> bool:
    """Whether ``location`` is an object-store URI (not a local path or ``file://``)."""
    return urlparse(str(location)).scheme in OBJECT_STORE_SCHEMES


def normalise_root(root: str | Path) -> str:
    """The canonical spelling of a lakehouse root: ``s3://bucket/prefix`` without a trailing
    slash, or an absolute local path.

    Raises:
        InvalidArgumentError: an unsupported scheme, or an object-store URI without a bucket.
    """
    text = str(root)
    parsed = urlparse(text)
    if parsed.scheme in OBJECT_STORE_SCHEMES:
        if not parsed.netloc:
            raise InvalidArgumentError(f"lakehouse URI {text!r} names no bucket")
        return f"s3://{parsed.netloc}{parsed.path}".rstrip("/")
    if parsed.scheme == "file":
        return str(Path(parsed.path).resolve())
    if parsed.scheme and len(parsed.scheme) > 1:  # "C:" is a drive, not a scheme
        raise InvalidArgumentError(
            f"lakehouse {text!r}: scheme {parsed.scheme!r} is not supported "
            f"(a local folder or one of {', '.join(s + '://' for s in OBJECT_STORE_SCHEMES)})"
        )
    return str(Path(text).resolve())


def join(location: str, *parts: str) -> str:
    """``location`` joined with relative ``parts`` ('/' separated, for URIs and paths)."""
    return "/".join([location.rstrip("/"), *(p.strip("/") for p in parts if p)])


def spark_uri(location: str) -> str:
    """``location`` as Spark's Hadoop file systems spell it (``s3://`` -> ``s3a://``)."""
    parsed = urlparse(location)
    if parsed.scheme in SPARK_SCHEME:
        return f"{SPARK_SCHEME[parsed.scheme]}://{location.split('://', 1)[1]}"
    return location


def arrow_uri(location: str) -> str:
    """``location`` as delta-rs and pyarrow spell it (``s3a://`` -> ``s3://``)."""
    return f"s3://{location.split('://', 1)[1]}" if location.startswith("s3a://") else location


def delta_storage_options(location: str) -> dict[str, str] | None:
    """delta-rs' ``storage_options`` for a table at ``location`` (None: local).

    Commits on S3 use conditional puts (If-None-Match), which AWS S3 and MinIO honour, so
    two writers can never both create log entry N: no DynamoDB lock table is needed.
    ``AWS_S3_LOCKING_PROVIDER`` / ``AWS_S3_ALLOW_UNSAFE_RENAME`` in the environment, if
    set, are still read by delta-rs itself.
    """
    if not is_remote(location):
        return None
    return {"conditional_put": settings().s3_conditional_put}


def fs_path(location: str) -> str:
    """``location`` as a path inside its pyarrow file system (``bucket/key`` on S3)."""
    return arrow_uri(location).split("://", 1)[1] if is_remote(location) else location


def filesystem(location: str) -> tuple[pyarrow.fs.FileSystem, str]:
    """A pyarrow file system for ``location`` and the path inside it (a new S3 client per
    call: keep the file system, and map further locations with :func:`fs_path`)."""
    import pyarrow.fs as pafs

    if is_remote(location):
        fs, _ = pafs.FileSystem.from_uri(arrow_uri(location))
        return fs, fs_path(location)
    return pafs.LocalFileSystem(), location


def local_state_dir(location: str) -> Path:
    """A local folder for what must sit on a file system beside a lakehouse (Great
    Expectations' project and Data Docs, SQL snapshot links, reports): the lakehouse itself
    when local, else ``$S3TM_STATE_DIR/<bucket>/<prefix>`` (default ``~/.cache/s3tm``)."""
    if not is_remote(location):
        return Path(location)
    return settings().state_dir / location.split("://", 1)[1]


# what S3 answers a conditional put that lost (412, or 409 for two at once) and a read of
# a lease deleted meanwhile
_LOST_RACE = ("PreconditionFailed", "ConditionalRequestConflict", "409", "412", "NoSuchKey", "404")


class LockTimeout(InvalidArgumentError):
    """A lakehouse lock stayed held by another process for longer than the wait allowed."""


class LockLost(InvalidArgumentError):
    """A lakehouse lock's lease was taken over while its holder still held it (a renewal
    found it replaced): what the holder wrote meanwhile may interleave with another's."""


def object_lock(
    location: str,
    *,
    lease_seconds: float = 600.0,
    wait_seconds: float = 900.0,
    renew_seconds: float | None = None,
) -> contextlib.AbstractContextManager[None]:
    """An exclusive lease on the object ``location`` (``s3://bucket/key``), as a context
    manager: created with a conditional put (If-None-Match: *), so exactly one of several
    processes on any machines creates it; deleted on exit.

    While it is held a thread renews it every ``renew_seconds`` (a third of the lease by
    default) with a conditional put on the lease it last wrote (If-Match: its ETag), so a
    holder that runs longer than ``lease_seconds`` keeps it. A holder that died leaves a
    lease that expires after ``lease_seconds``; the next process takes it over by
    overwriting that expired lease conditionally (If-Match), so of several processes that
    saw it expire exactly one takes it. The release deletes the lease only if it is still
    the one this holder wrote (a conditional delete, If-Match): never a lease another
    process took over.

    Raises:
        LockTimeout: when the lease could not be taken within ``wait_seconds``.
        LockLost: on exit, when a renewal found the lease taken over while it was held.
    """
    import json
    import threading
    import time
    import uuid

    import boto3
    from botocore.exceptions import ClientError

    bucket, _, key = arrow_uri(location).split("://", 1)[1].partition("/")
    client = boto3.client("s3")  # endpoint and credentials from the AWS_* environment
    owner = uuid.uuid4().hex
    every = renew_seconds if renew_seconds is not None else lease_seconds / 3

    def lease() -> bytes:
        return json.dumps({"owner": owner, "expires": time.time() + lease_seconds}).encode()

    def lost_race(err: ClientError) -> bool:
        return err.response.get("Error", {}).get("Code", "") in _LOST_RACE

    def take() -> str:
        """Wait for the lease; its ETag once this process holds it."""
        deadline = time.monotonic() + wait_seconds
        pause = 0.05
        while True:
            try:
                return str(
                    client.put_object(Bucket=bucket, Key=key, Body=lease(), IfNoneMatch="*")["ETag"]
                )
            except ClientError as err:
                if not lost_race(err):
                    raise
            try:
                found = client.get_object(Bucket=bucket, Key=key)
                current = json.loads(found["Body"].read())
                if float(current.get("expires", 0)) < time.time():  # its holder died
                    # ours only if nobody replaced the expired lease since we read it
                    put = client.put_object(
                        Bucket=bucket, Key=key, Body=lease(), IfMatch=found["ETag"]
                    )
                    return str(put["ETag"])
            except ClientError as err:
                if not lost_race(err):
                    raise
                continue  # released, or taken over, since we read it: try again at once
            if time.monotonic() > deadline:
                raise LockTimeout(
                    f"lock {location} held by another process for over {wait_seconds:.0f}s"
                )
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    @contextlib.contextmanager
    def held() -> Iterator[None]:
        state = {"etag": take(), "lost": ""}
        done = threading.Event()

        def renew() -> None:
            while not done.wait(every):
                try:
                    put = client.put_object(
                        Bucket=bucket, Key=key, Body=lease(), IfMatch=state["etag"]
                    )
                    state["etag"] = str(put["ETag"])
                except ClientError as err:
                    if lost_race(err):
                        state["lost"] = f"lock {location}: the lease was taken over while held"
                        return
                    # a failed renewal is retried at the next turn: the lease still runs
                    continue

        renewer = threading.Thread(target=renew, name=f"lease {key}", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            done.set()
            renewer.join()
            if not state["lost"]:
                # only the lease this holder wrote: a lease taken over stays
                with contextlib.suppress(ClientError):
                    client.delete_object(Bucket=bucket, Key=key, IfMatch=state["etag"])
        if state["lost"]:
            raise LockLost(state["lost"])

    return held()
