"""Session settings that depend on where a job runs (no Spark started)."""

from __future__ import annotations

import io

from spark_jobs.lake import session


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_stage_progress_bar_shows_on_a_terminal_only(monkeypatch) -> None:
    monkeypatch.setattr(session.sys, "stderr", _Terminal())
    assert session.console_progress() == "true"
    monkeypatch.setattr(session.sys, "stderr", io.StringIO())  # a log file, a pipe
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
