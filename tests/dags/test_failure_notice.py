"""A hung run is noticed: every task of every DAG has the deployment's timeout and every
run its run timeout (``S3TM_TASK_TIMEOUT_MINUTES``, ``S3TM_RUN_TIMEOUT_MINUTES``); a Spark
job that outlives its task's timeout is stopped, the run fails, and the failure reaches a
team's mailbox through Airflow's SMTP notifier (``S3TM_ALERT_EMAIL``, the ``smtp_default``
connection), here a mail server on loopback (aiosmtpd) that keeps what it was sent."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from email import message_from_bytes
from pathlib import Path

import pytest

from tests.dags.conftest import embedded_env

REPO = Path(__file__).resolve().parents[2]
AIRFLOW = Path(sys.executable).with_name("airflow")


def test_every_task_and_run_has_the_deployments_timeouts(tmp_path) -> None:
    env = embedded_env(
        tmp_path / "home", S3TM_TASK_TIMEOUT_MINUTES="45", S3TM_RUN_TIMEOUT_MINUTES="180"
    )
    code = textwrap.dedent("""
        import json
        from airflow.models.dagbag import DagBag
        bag = DagBag(dag_folder=%r)
        print(json.dumps({d.dag_id: {
            "tasks": sorted({str(t.execution_timeout) for t in d.tasks}),
            "run": d.dagrun_timeout.total_seconds(),
            "callbacks": [bool(t.on_failure_callback) for t in d.tasks],
        } for d in bag.dags.values()}))
    """) % str(REPO / "dags")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dags = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(dags) == 4
    for dag_id, dag in dags.items():
        assert dag["tasks"] == [str(timedelta(minutes=45))], dag_id
        assert not any(dag["callbacks"]), "no address: no notifier"
    # a DAG's run ends before its next one is due: the hourly ones at their hour
    assert dags["s3tm_remap"]["run"] == dags["s3tm_maintenance"]["run"] == 180 * 60
    assert dags["s3tm_ingest"]["run"] == dags["s3tm_monitor"]["run"] == 3600


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.airflow
@pytest.mark.spark
def test_a_spark_job_past_its_timeout_is_stopped_and_the_failure_is_mailed(tmp_path) -> None:
    """s3tm_ingest with a 6-second task timeout: its Spark job (a JVM that takes longer to
    start) is killed, the task fails (no retry), the run fails, and one mail per failed
    task arrives naming the DAG, the task and the run, with a link to the task's log."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.handlers import Message

    received: list = []

    class Keep(Message):
        def handle_message(self, message) -> None:
            received.append(message)

    port = _free_port()
    server = Controller(Keep(message_class=None), hostname="127.0.0.1", port=port)
    server.start()
    try:
        landing = tmp_path / "landing"
        landing.mkdir()
        (landing / "posts.jsonl").write_text(
            "".join(
                json.dumps({"id": i, "text": f"post {i} about words", "created_at":
                            "2026-01-05T10:00:00Z"}) + "\n" for i in range(100)
            )
        )  # fmt: skip
        smtp = {"conn_type": "smtp", "host": "127.0.0.1", "port": port,
                "extra": {"from_email": "airflow@s3tm.example", "disable_tls": True,
                          "disable_ssl": True}}  # fmt: skip
        env = embedded_env(
            tmp_path / "home",
            S3TM_LANDING=str(landing),
            S3TM_TASK_TIMEOUT_MINUTES="0.1",
            S3TM_ALERT_EMAIL="platform-team@s3tm.example",
            AIRFLOW_CONN_SMTP_DEFAULT=json.dumps(smtp),
        )
        for argv in (["db", "migrate"], ["dags", "test", "s3tm_ingest"]):
            done = subprocess.run(
                [str(AIRFLOW), *argv], env=env, capture_output=True, text=True, timeout=600
            )
            if argv[0] == "db":
                assert done.returncode == 0, done.stderr[-3000:]
        log = done.stdout + done.stderr
        assert "Timeout" in log or "timed out" in log.lower(), log[-3000:]
        deadline = time.monotonic() + 30
        while not received and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        server.stop()
    assert received, f"no mail arrived; the run's output:\n{log[-3000:]}"
    mail = message_from_bytes(received[0].as_bytes())
    assert mail["To"] == "platform-team@s3tm.example"
    body = "".join(
        bytes(part.get_payload(decode=True)).decode()
        for part in mail.walk() if part.get_content_maintype() == "text"
    )  # fmt: skip
    assert "s3tm_ingest" in mail["Subject"] and "ingest" in mail["Subject"], mail["Subject"]
    assert "failed" in mail["Subject"].lower(), mail["Subject"]
    # the link to the task's log in this run
    assert re.search(r"/dags/s3tm_ingest/runs/[^\"]+/tasks/ingest", body), body[-2000:]
