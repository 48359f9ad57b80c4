"""What the deploy tests read from infra/k8s: an overlay rendered by ``kubectl kustomize``,
and a spark-defaults.conf as its settings."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml


def rendered(target: Path) -> list[dict]:
    """The documents ``kubectl kustomize target`` renders (skips without kubectl)."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl (kustomize) not installed")
    text = subprocess.run(
        ["kubectl", "kustomize", str(target)], capture_output=True, text=True, check=True
    ).stdout
    return [d for d in yaml.safe_load_all(text) if d]


def conf_settings(text: str) -> dict[str, str]:
    """A spark-defaults.conf's settings (comments and blank lines left out)."""
    settings = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and not parts[0].startswith("#"):
            settings[parts[0]] = parts[1].strip()
    return settings


def spark_defaults(documents: list[dict]) -> dict[str, str]:
    """The settings of the rendered ``s3tm-spark-defaults`` (the remap jobs' Spark pods)."""
    conf = next(d for d in documents if d["metadata"]["name"] == "s3tm-spark-defaults")
    return conf_settings(conf["data"]["spark-defaults.conf"])


def task_pod(documents: list[dict]) -> dict:
    """Airflow's task pod: the KubernetesExecutor's template, kept as a file in the rendered
    ``airflow-pod-template`` ConfigMap."""
    template = next(d for d in documents if d["metadata"]["name"] == "airflow-pod-template")
    return yaml.safe_load(template["data"]["pod-template.yaml"])
