"""infra/monitoring/s3tm-alerts.yml as the PrometheusRule of infra/k8s/components/monitoring:
``render()`` is what the file must hold (tests/deploy/test_kubernetes.py compares), and
``python -m tests.deploy.prometheus_rule`` prints it after an edit of the rules."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "infra" / "monitoring" / "s3tm-alerts.yml"
TARGET = REPO / "infra" / "k8s" / "components" / "monitoring" / "prometheus-rule.yaml"
HEADER = """\
# infra/monitoring/s3tm-alerts.yml as a PrometheusRule (Prometheus Operator, e.g.
# kube-prometheus-stack): the same groups, kept equal by tests/deploy/test_kubernetes.py.
# Regenerate after editing the rules (from the repository's root):
#   .venv/bin/python -m tests.deploy.prometheus_rule \\
#     > infra/k8s/components/monitoring/prometheus-rule.yaml
"""


def render() -> str:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    document = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "s3tm-alerts",
            # kube-prometheus-stack's default rule selector: its Helm release's name
            "labels": {"app.kubernetes.io/name": "s3tm-alerts", "release": "kube-prometheus-stack"},
        },
        "spec": {"groups": groups},
    }
    return HEADER + yaml.safe_dump(document, sort_keys=False, width=100)


if __name__ == "__main__":
    print(render(), end="")
