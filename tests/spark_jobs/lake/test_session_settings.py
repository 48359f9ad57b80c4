"""Session settings that depend on where a job runs (no Spark started)."""

from __future__ import annotations

import io
import sys

from spark_jobs.lake import session


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_stage_progress_bar_shows_on_a_terminal_only(monkeypatch) -> None:
    monkeypatch.setattr(sys, "stderr", _Terminal())  # the session module's sys
    assert session.console_progress() == "true"
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a log file, a pipe
    assert session.console_progress() == "false"


def test_spark_defaults_conf_is_read_from_the_conf_dir(tmp_path) -> None:
    """What the spark-submit PySpark launches reads (and a builder setting would override)."""
    (tmp_path / "spark-defaults.conf").write_text(
        "# comment\nspark.sql.shuffle.partitions   64\n\nspark.executor.memory 6g\n"
    )
    assert session.properties_file({"SPARK_CONF_DIR": str(tmp_path)}) == {
        "spark.sql.shuffle.partitions": "64",
        "spark.executor.memory": "6g",
    }
    assert session.properties_file({"SPARK_HOME": str(tmp_path.parent)}) == {}
    assert session.properties_file({}) == {}


_LISTENING = """
import json, psutil
from spark_jobs.lake.session import build_session
spark = build_session("s3tm-loopback-probe", master="local[1]")
pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
listening = [c.laddr for c in psutil.Process(pid).net_connections("inet") if c.status == "LISTEN"]
ui = spark.sparkContext.uiWebUrl
print(json.dumps({"ui": ui, "listening": [[a.ip, a.port] for a in listening]}))
"""


def test_a_local_session_listens_on_loopback_only(spark_process_env) -> None:
    """A laptop's `make demo` opens no port to its network: the driver's RPC, block manager
    and UI (on here) listen on 127.0.0.1, whatever the machine's hostname resolves to."""
    import ipaddress
    import json
    import subprocess
    import sys

    env = {k: v for k, v in spark_process_env.items() if k != "SPARK_LOCAL_IP"}
    done = subprocess.run(
        [sys.executable, "-c", _LISTENING],
        env={**env, "S3TM_SPARK_UI": "true", "S3TM_SPARK_LOG_LEVEL": "ERROR"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    ports = {port for _, port in printed["listening"]}
    assert len(ports) >= 3  # the RPC, the block manager, the UI (and Py4J's gateway)
    # (Java's sockets are dual-stack: 127.0.0.1 shows as ::ffff:127.0.0.1)
    addresses = [ipaddress.ip_address(ip) for ip, _ in printed["listening"]]
    v4 = [getattr(a, "ipv4_mapped", None) or a for a in addresses]
    assert all(a.is_loopback for a in v4), printed
    assert printed["ui"].startswith("http://127.0.0.1:"), printed["ui"]
    assert int(printed["ui"].rsplit(":", 1)[1]) in ports
