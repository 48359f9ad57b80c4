"""Every manifest of infra/k8s applied, server-side, to a real API server built here
(``make k8s-check``; tests/deploy/kube_apiserver.py): the base and both overlays, every
object accepted and stored, the CRD-backed kinds (SparkApplication, PrometheusRule)
validated by their projects' own schemas. A manifest the server refuses fails here, and a
deliberately wrong one shows that it would."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "infra" / "k8s"


def _rendered(server, target: Path) -> list[dict]:
    text = server.kubectl("kustomize", str(target)).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.mark.parametrize(
    "target", ["base", "overlays/dev", "overlays/prod", "overlays/local", "local/services"]
)
def test_the_api_server_accepts_and_stores_every_object(kube_apiserver, target):
    documents = _rendered(kube_apiserver, K8S / target)
    # base and prod share the namespace s3tm, and a Job's pod template is immutable: prod's
    # topic Job differs (Kafka's TLS), so it replaces base's as DEPLOY.md tells an operator
    # to (delete the one-shot Job, then apply)
    for doc in documents:
        if doc["kind"] == "Job":
            meta = doc["metadata"]
            kube_apiserver.kubectl("delete", "job", meta["name"], "-n", meta["namespace"],
                                   "--ignore-not-found")  # fmt: skip
    applied = kube_apiserver.kubectl("apply", "--server-side", "-k", str(K8S / target))
    lines = [line for line in applied.stdout.splitlines() if line.strip()]
    assert len(lines) == len(documents), applied.stdout
    assert all(line.endswith("serverside-applied") for line in lines), applied.stdout
    for doc in documents:
        meta = doc["metadata"]
        where = ["-n", meta["namespace"]] if "namespace" in meta else []
        kind = f"{doc['kind'].lower()}.{doc['apiVersion'].split('/')[0]}"
        if "/" not in doc["apiVersion"]:
            kind = doc["kind"].lower()
        stored = kube_apiserver.kubectl("get", kind, meta["name"], *where, "-o", "yaml")
        assert yaml.safe_load(stored.stdout)["metadata"]["name"] == meta["name"]


def test_a_manifest_the_schema_forbids_is_refused(kube_apiserver, tmp_path):
    """The SparkApplication CRD's schema is enforced: an executor count that is a word."""
    matcher = next(
        d for d in _rendered(kube_apiserver, K8S / "base") if d["kind"] == "SparkApplication"
    )
    matcher["metadata"]["name"] = "s3tm-matcher-wrong"
    matcher["spec"]["executor"]["instances"] = "many"
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(matcher))
    refused = kube_apiserver.kubectl("apply", "--server-side", "-f", str(path), check=False)
    assert refused.returncode != 0
    assert "spec.executor.instances" in refused.stderr, refused.stderr
