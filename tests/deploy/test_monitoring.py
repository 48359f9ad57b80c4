"""infra/monitoring checked offline: the alert rules by ``promtool check rules`` and their
unit tests by ``promtool test rules`` (Debian's ``prometheus`` package; .ci/run installs it,
and the check fails rather than skips without it), and every metric the rules and the
Grafana dashboard name is one ``s3tm metrics`` exports. tests/s3tm/test_prometheus.py runs
the dashboard's queries and the rules in a live Prometheus."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from s3tm.monitoring.exporter import exposition
from spark_jobs.lake.delta_io import Lakehouse

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "infra" / "monitoring"
RULES = MONITORING / "s3tm-alerts.yml"
DASHBOARD = MONITORING / "s3tm-dashboard.json"
METRIC = re.compile(r"\bs3tm_[a-z0-9_]+")


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: apt-get install prometheus (.ci/run installs it)")
    return found


def test_the_rules_pass_promtool_check(promtool: str) -> None:
    done = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_fires_and_stays_quiet_in_the_rule_unit_tests(promtool: str) -> None:
    done = subprocess.run(
        [promtool, "test", "rules", "rules-test.yml"],
        cwd=MONITORING / "tests",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tested = yaml.safe_load((MONITORING / "tests" / "rules-test.yml").read_text())["tests"]
    cases = [case for test in tested for case in test.get("alert_rule_test", [])]
    # every alert has a case where it fires and one where it does not
    assert {c["alertname"] for c in cases if c["exp_alerts"]} == alerts
    assert {c["alertname"] for c in cases if not c["exp_alerts"]} == alerts


def test_every_alert_has_a_runbook_line_in_operations() -> None:
    operations = (REPO / "docs" / "OPERATIONS.md").read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", heading.lower()).strip().replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", operations, flags=re.M)
    }
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            runbook = rule["annotations"]["runbook_url"]
            path, _, anchor = runbook.partition("#")
            assert path == "docs/OPERATIONS.md", rule["alert"]
            assert anchor in anchors, f"{rule['alert']}: no runbook entry '{anchor}'"


def _exported_names(tmp_path: Path) -> set[str]:
    text = exposition(Lakehouse(None, str(tmp_path / "empty"), engine="rs"))
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.add(f"{family.name}_total")
        if family.type == "histogram":
            names |= {f"{family.name}_{part}" for part in ("bucket", "count", "sum")}
    return names


def test_the_rules_and_the_dashboard_name_only_exported_metrics(tmp_path: Path) -> None:
    exported = _exported_names(tmp_path)
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(queries) >= 15 and all(p["targets"] for p in dashboard["panels"])
    named = set(METRIC.findall(" ".join(queries))) | set(METRIC.findall(RULES.read_text()))
    assert named - exported == set()
    # the figures the issue lists each have a panel
    for wanted in (
        "s3tm_stream_posts_total",
        "s3tm_stream_batch_seconds_total",
        "s3tm_stream_trigger_seconds",
        "s3tm_stream_backlog_posts",
        "s3tm_stream_shedding_level",
        "s3tm_stream_posts_dropped_total",
        "s3tm_stream_matches_total",
        "s3tm_stream_deliveries_total",
        "s3tm_stream_quarantined_records_total",
        "s3tm_stream_routing_version",
        "s3tm_routing_published_timestamp_seconds",
        "s3tm_stream_relative_throughput",
        "s3tm_stream_hot_words",
        "s3tm_remap_last_relative_throughput",
        "s3tm_remap_last_moved_subscriptions",
        "s3tm_stream_delivery_latency_seconds_bucket",
    ):
        assert wanted in named, wanted
