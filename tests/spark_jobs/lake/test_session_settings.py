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
