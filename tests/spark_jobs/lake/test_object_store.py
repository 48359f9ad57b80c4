"""A lakehouse on object storage (``s3://``), against a real S3-compatible server on loopback
(moto's server, from PyPI): delta-rs commits with conditional puts, driver-side tables,
staged commits with their app transaction, time travel, the cross-machine lock, and
``s3tm sql`` reading it. Spark's half (``s3a://``): tests/spark_jobs/test_s3a.py."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from core.errors import InvalidArgumentError
from spark_jobs.lake import storage
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.subscription_store import active_subscriptions, add_subscriptions
from tests.conftest import s3_environment

BUCKET = "s3tm-lake"


@pytest.fixture
def s3_root(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> str:
    """A fresh ``s3://`` lakehouse root; credentials only in the environment."""
    import boto3

    for key, value in {
        **s3_environment(s3_endpoint),
        "S3TM_STATE_DIR": str(tmp_path / "state"),
    }.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3")
    if BUCKET not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=BUCKET)
    return f"s3://{BUCKET}/{tmp_path.name}"


def test_roots_are_spelled_for_each_engine(tmp_path):
    assert storage.normalise_root("s3a://bucket/lake/") == "s3://bucket/lake"
    assert storage.spark_uri("s3://bucket/lake/t") == "s3a://bucket/lake/t"
    assert storage.arrow_uri("s3a://bucket/lake") == "s3://bucket/lake"
    assert storage.normalise_root(tmp_path / "x" / "..") == str(tmp_path)
    assert storage.spark_uri(str(tmp_path)) == str(tmp_path)
    assert storage.delta_storage_options(str(tmp_path)) is None
    with pytest.raises(InvalidArgumentError, match="names no bucket"):
        storage.normalise_root("s3:///lake")
    with pytest.raises(InvalidArgumentError, match="not supported"):
        storage.normalise_root("hdfs://namenode/lake")


def test_driver_tables_on_s3_read_back_and_equal_delta_rs(s3_root):
    lake = Lakehouse(None, s3_root, engine="rs")
    assert lake.remote and lake.location == s3_root
    assert not lake.exists("subscriptions.registry")
    first = add_subscriptions(lake, ["storm warning", "cup final"], "alice")
    second = add_subscriptions(lake, ["storm"], "bob")
    assert first == [1, 2] and second == [3]
    rows = active_subscriptions(lake)
    assert [r["words"] for r in rows] == [["storm", "warn"], ["cup", "final"], ["storm"]]
    # the same table through delta-rs directly (the reference reader)
    direct = DeltaTable(lake.path("subscriptions.registry"), storage_options=lake.storage_options)
    assert direct.version() == lake.version("subscriptions.registry") == 1
    assert sorted(direct.to_pyarrow_table()["sub_id"].to_pylist()) == [1, 2, 3]
    assert lake.row_count("subscriptions.registry") == 3
    # time travel: version 0 held alice's two
    assert lake.read_arrow("subscriptions.registry", version=0).num_rows == 2
    snapshot = lake.snapshot("subscriptions.registry", as_of=0)
    assert snapshot.version == 0 and snapshot.dataset.to_table().num_rows == 2
    now = dt.datetime.now(dt.UTC)
    assert lake.snapshot("subscriptions.registry", as_of=now).version == 1
    # nothing was written to the local state folder but what must be local
    assert not (lake.root / "subscriptions").exists()


def test_staged_files_commit_once_per_batch(s3_root):
    lake = Lakehouse(None, s3_root, engine="rs")
    spec_rows = {
        "post_id": ["p1", "p2"],
        "sub_id": [4, 5],
        "subscriber": ["alice", "bob"],
        "matcher_id": [0, 1],
        "routing_version": [1, 1],
        "batch_id": [7, 7],
        "matched_at": [dt.datetime(2026, 11, 23, tzinfo=dt.UTC)] * 2,
    }
    from schemas import table

    schema = table("matches").schema
    data = pa.table({f.name: spec_rows.get(f.name) for f in schema}, schema=schema)

    def stage() -> str:
        staging = lake.staging_dir("matches")
        store, key = storage.filesystem(storage.join(staging, "part-00000.parquet"))
        pq.write_table(data, key, filesystem=store)
        return staging

    done = lake.commit_staged("matches", stage(), app_id="stream-test", batch_id=7)
    assert (done.files, done.rows, done.skipped) == (1, 2, False)
    replay = stage()  # a replayed batch: its files are dropped, nothing is committed twice
    again = lake.commit_staged("matches", replay, app_id="stream-test", batch_id=7)
    assert again.skipped and lake.row_count("matches") == 2
    store, key = storage.filesystem(replay)
    assert store.get_file_info(key).type == pa.fs.FileType.NotFound
    assert lake.last_batch("matches", "stream-test") == 7
    assert sorted(lake.read_arrow("matches")["post_id"].to_pylist()) == ["p1", "p2"]


def test_the_object_store_lock_excludes_across_holders_and_outlives_a_dead_one(s3_root):
    inside, overlaps, order = [0], [0], []

    def hold(k: int) -> None:
        lake = Lakehouse(None, s3_root, engine="rs")  # one per holder, as on two machines
        with lake.locked("routing.versions"):
            inside[0] += 1
            overlaps[0] = max(overlaps[0], inside[0])
            time.sleep(0.05)
            order.append(k)
            inside[0] -= 1

    threads = [threading.Thread(target=hold, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(order) == [0, 1, 2, 3] and overlaps[0] == 1
    # a holder that died left its lease; once expired the next process takes it over
    import boto3

    key = storage.join(s3_root, "_locks", "routing.versions.lock").split(f"{BUCKET}/", 1)[1]
    stale = json.dumps({"owner": "dead", "expires": time.time() - 1}).encode()
    boto3.client("s3").put_object(Bucket=BUCKET, Key=key, Body=stale)
    with Lakehouse(None, s3_root, engine="rs").locked("routing.versions"):
        pass
    live = json.dumps({"owner": "alive", "expires": time.time() + 600}).encode()
    boto3.client("s3").put_object(Bucket=BUCKET, Key=key, Body=live)
    lock = storage.object_lock(
        storage.join(s3_root, "_locks", "routing.versions.lock"), wait_seconds=0.5
    )
    with pytest.raises(storage.LockTimeout, match="held by another process"), lock:
        pass


def test_two_processes_that_see_a_lease_expire_take_it_over_one_at_a_time(s3_root, monkeypatch):
    """Two contenders read the same expired lease before either writes (held at a barrier
    after their read), and one acts on it only after the other took over: the takeover is
    conditional on the lease it read, so the late one finds it replaced and waits for the
    release; they never hold the lock together."""
    import boto3

    key = storage.join(s3_root, "_locks", "routing.versions.lock").split(f"{BUCKET}/", 1)[1]
    stale = json.dumps({"owner": "dead", "expires": time.time() - 1}).encode()
    boto3.client("s3").put_object(Bucket=BUCKET, Key=key, Body=stale)
    both_read = threading.Barrier(2, timeout=60)
    make_client = boto3.client

    class ReadsThenWaits:
        """A client whose first read of the lease waits until the other contender read it."""

        def __init__(self, client):
            self.client, self.waited = client, False

        def get_object(self, **kwargs):
            found = self.client.get_object(**kwargs)
            if not self.waited:
                self.waited = True
                if both_read.wait() == 0:
                    time.sleep(0.5)  # the other one takes over first; this one acts late
            return found

        def __getattr__(self, name):
            return getattr(self.client, name)

    monkeypatch.setattr(boto3, "client", lambda *a, **k: ReadsThenWaits(make_client(*a, **k)))
    inside, most, held = [0], [0], []
    guard = threading.Lock()

    def contend(k: int) -> None:
        with storage.object_lock(storage.join(s3_root, "_locks", "routing.versions.lock")):
            with guard:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(1.0)
            with guard:
                inside[0] -= 1
            held.append(k)

    threads = [threading.Thread(target=contend, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(held) == [0, 1] and most[0] == 1


def _lease(s3_root: str) -> dict | None:
    import boto3

    key = storage.join(s3_root, "_locks", "t.lock").split(f"{BUCKET}/", 1)[1]
    try:
        return json.loads(boto3.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read())
    except boto3.client("s3").exceptions.NoSuchKey:
        return None


def test_a_holder_past_its_lease_keeps_it_while_it_renews(s3_root):
    """The first holder runs 2.5 leases; its renewals keep the second out until it leaves."""
    location = storage.join(s3_root, "_locks", "t.lock")
    events: list[tuple[str, float]] = []
    first_in = threading.Event()

    def first() -> None:
        with storage.object_lock(location, lease_seconds=1.0, renew_seconds=0.2):
            events.append(("first in", time.monotonic()))
            first_in.set()
            time.sleep(2.5)
            events.append(("first out", time.monotonic()))

    holder = threading.Thread(target=first)
    holder.start()
    assert first_in.wait(30)
    with storage.object_lock(location, lease_seconds=1.0, wait_seconds=30):
        events.append(("second in", time.monotonic()))
    holder.join(30)
    assert [e for e, _ in events] == ["first in", "first out", "second in"]
    assert _lease(s3_root) is None  # released


def test_the_release_never_deletes_a_lease_another_process_took(s3_root):
    """A holder that stalled past its lease (no renewal in time) finds it taken over: its
    release leaves the new holder's lease, and its exit says the lock was lost."""
    location = storage.join(s3_root, "_locks", "t.lock")
    taken = threading.Event()
    second_owner: list[str] = []

    def second() -> None:
        with storage.object_lock(location, lease_seconds=60, wait_seconds=30):
            lease = _lease(s3_root)
            assert lease is not None
            second_owner.append(lease["owner"])
            taken.set()
            time.sleep(1.5)

    contender = threading.Thread(target=second)
    with (
        pytest.raises(storage.LockLost, match="taken over"),
        storage.object_lock(location, lease_seconds=0.3, renew_seconds=1.0),
    ):
        contender.start()  # waits out the 0.3 s lease, then takes it over
        assert taken.wait(30)
        time.sleep(0.8)  # the first holder's renewal finds the lease replaced
    # the second holder still holds its lease: the first one's release did not delete it
    assert _lease(s3_root)["owner"] == second_owner[0]
    contender.join(30)
    assert _lease(s3_root) is None


def test_a_lease_taken_over_at_the_release_is_not_deleted(s3_root, monkeypatch):
    """Another process takes the lease over just as its holder releases it (between a read
    and a delete, for a release that reads first): the release is conditional on the lease
    its holder wrote, so the new holder's lease stays."""
    import boto3

    key = storage.join(s3_root, "_locks", "t.lock").split(f"{BUCKET}/", 1)[1]
    theirs = json.dumps({"owner": "other", "expires": time.time() + 600}).encode()
    make_client = boto3.client

    class TakenOverAtRelease:
        def __init__(self, client):
            self.client = client

        def delete_object(self, **kwargs):
            make_client("s3").put_object(Bucket=BUCKET, Key=key, Body=theirs)
            return self.client.delete_object(**kwargs)

        def __getattr__(self, name):
            return getattr(self.client, name)

    monkeypatch.setattr(boto3, "client", lambda *a, **k: TakenOverAtRelease(make_client(*a, **k)))
    with storage.object_lock(storage.join(s3_root, "_locks", "t.lock")):
        pass
    monkeypatch.setattr(boto3, "client", make_client)
    assert _lease(s3_root) == json.loads(theirs)


def test_s3tm_sql_reads_an_s3_lakehouse(s3_root):
    lake = Lakehouse(None, s3_root, engine="rs")
    add_subscriptions(lake, ["storm warning", "cup final", "storm"], "alice")
    run = subprocess.run(
        [sys.executable, "-m", "s3tm.cli.main", "sql", "--lakehouse", s3_root, "--format",
         "json", "SELECT count(*) AS n FROM subscriptions.registry WHERE subscriber = 'alice'"],
        capture_output=True, text=True, env=dict(os.environ), timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"n": 3}


def test_run_reports_go_to_the_object_store(s3_root, tmp_path):
    from s3tm.orchestration.reports.store import write_report

    location = write_report(s3_root, "remap", "manual__2026-11-23T10:00", ["# run", "ok"])
    assert location == f"{s3_root}/reports/remap-manual__2026-11-23T10_00.md"
    store, key = storage.filesystem(str(location))
    with store.open_input_stream(key) as data:
        assert data.read().decode() == "# run\nok"


def test_landing_files_on_the_object_store_are_listed_for_spark(s3_root):
    from core.errors import InputDataError
    from spark_jobs.jobs.ingest import landing_files

    landing = storage.join(s3_root, "landing")
    with pytest.raises(InputDataError, match="empty or missing"):
        landing_files(landing, "*.jsonl*")
    store, prefix = storage.filesystem(landing)
    for name in ("b.jsonl.gz", "a.jsonl", "notes.txt"):
        with store.open_output_stream(f"{prefix}/{name}") as out:
            out.write(b"{}\n")
    bucket_path = storage.spark_uri(landing)
    assert landing_files(landing, "*.jsonl*") == [
        f"{bucket_path}/a.jsonl",
        f"{bucket_path}/b.jsonl.gz",
    ]


def test_the_data_docs_of_every_run_outlive_the_disk_that_rendered_them(
    s3_root, tmp_path, monkeypatch
):
    """Each validation runs on a pod's empty disk (Kubernetes); its Data Context is pulled
    from the object store and pushed back, so the store holds every run's results."""
    import pyarrow.fs as pafs

    from spark_jobs.jobs import publish
    from spark_jobs.lake.validation import DATA_DOCS_INDEX, QUALITY_DIR
    from tests.spark_jobs.lake.test_validation import _candidate, _silver

    def validations() -> list[str]:
        store, prefix = storage.filesystem(storage.join(s3_root, QUALITY_DIR))
        found = store.get_file_info(pafs.FileSelector(prefix, recursive=True))
        return [f.path for f in found if "/validations/" in f.path and f.path.endswith(".json")]

    lake = Lakehouse(None, s3_root, engine="rs")
    _silver(lake)
    _candidate(lake, 1)
    first = publish.validate_version(lake, 1)
    assert first["success"] and first["data_docs"] == f"{s3_root}/{QUALITY_DIR}/{DATA_DOCS_INDEX}"
    assert len(validations()) == len(first["suites"]) == 4
    # the next run: another pod, whose disk holds nothing of the first
    monkeypatch.setenv("S3TM_STATE_DIR", str(tmp_path / "another-pod"))
    lake = Lakehouse(None, s3_root, engine="rs")
    _candidate(lake, 2)
    second = publish.validate_version(lake, 2)
    assert second["success"] and len(validations()) == 8
    store, index = storage.filesystem(second["data_docs"])
    with store.open_input_stream(index) as page:
        listed = page.read().decode()
    # the index the second pod rendered links both runs' results of a suite
    assert listed.count("validations/routing_mappings/") == 2, listed[:2000]
