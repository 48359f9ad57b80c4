"""Who may do what, asked of a real API server (``make k8s-check``;
tests/deploy/kube_apiserver.py): every pod any overlay renders is admitted under Pod
Security "restricted", the label its namespace carries; each service account may do what
it needs and is refused what it must not (RBAC through ``kubectl auth can-i``); and what
RBAC cannot say (which account a started pod runs as, which Secrets it reads, which objects
a task may change) is refused by the ValidatingAdmissionPolicy ``s3tm-pod-starters``,
tried as each account with server-side dry runs."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "infra" / "k8s"
OVERLAYS = ["base", "overlays/dev", "overlays/prod", "overlays/local"]
NS = "s3tm"  # the base's namespace

pytestmark = pytest.mark.kubernetes


def _rendered(server, target: str) -> list[dict]:
    text = server.kubectl("kustomize", str(K8S / target)).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _applied(server, target: str) -> list[dict]:
    """``target`` applied server-side (its namespace, accounts, policy); its documents."""
    documents = _rendered(server, target)
    for doc in documents:  # a Job's pod template is immutable (test_k8s_apiserver.py)
        if doc["kind"] == "Job":
            meta = doc["metadata"]
            server.kubectl("delete", "job", meta["name"], "-n", meta["namespace"],
                           "--ignore-not-found")  # fmt: skip
    server.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(K8S / target))
    # the namespace's `default` account, which a controller-manager would have made
    namespace = next(d["metadata"]["name"] for d in documents if d["kind"] == "Namespace")
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "default", "namespace": namespace}}  # fmt: skip
    server.kubectl("apply", "--server-side", "-f", "-", input_text=json.dumps(account))
    # the admission policy in force before a test relies on it: a probe it must refuse
    probe = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "s3tm-policy-probe", "namespace": namespace}}  # fmt: skip
    _once_in_force(
        server, "create", "--dry-run=server", "-f", "-",
        f"--as=system:serviceaccount:{namespace}:s3tm-task",
        refusal="s3tm-pod-starters", input_text=json.dumps(probe),
    )  # fmt: skip
    return documents


def _once_in_force(server, *argv: str, refusal: str, input_text: str | None = None):
    """``kubectl argv`` until the API server refuses it with ``refusal``: an admission
    policy just applied takes a moment to reach the server's admission plugin. Returns the
    last try (a test asserts on it)."""
    deadline = time.monotonic() + 30
    while True:
        done = server.kubectl(*argv, check=False, input_text=input_text)
        if refusal in done.stderr or time.monotonic() > deadline:
            return done
        time.sleep(1)


def _pod(name: str, namespace: str, spec: dict, image: str) -> dict:
    spec = copy.deepcopy(spec)
    for container in spec.get("initContainers", []) + spec["containers"]:
        container.setdefault("image", image)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}  # fmt: skip


def _spark_application_pods(app: dict, namespace: str) -> list[dict]:
    """The driver's and executors' pods as the operator's webhook shapes them from the
    SparkApplication's security contexts, volumes and accounts."""
    spec = app["spec"]
    pods = []
    for role in ("driver", "executor"):
        part = spec[role]
        container = {"name": f"spark-kubernetes-{role}", "image": spec["image"]}
        if "securityContext" in part:
            container["securityContext"] = part["securityContext"]
        if "volumeMounts" in part:
            container["volumeMounts"] = part["volumeMounts"]
        pod_spec: dict = {"containers": [container], "volumes": spec.get("volumes", [])}
        if "podSecurityContext" in part:
            pod_spec["securityContext"] = part["podSecurityContext"]
        if "serviceAccount" in part:
            pod_spec["serviceAccountName"] = part["serviceAccount"]
        pods.append(_pod(f"{app['metadata']['name']}-{role}", namespace, pod_spec, spec["image"]))
    return pods


def _pods_of(documents: list[dict]) -> list[dict]:
    """Every pod the rendered documents make: the workloads' templates, Airflow's task pod
    (the KubernetesExecutor's template), the remap jobs' Spark pods (spark-submit's
    templates) and the matcher's driver and executors (the SparkApplication)."""
    namespace = next(d["metadata"]["name"] for d in documents if d["kind"] == "Namespace")
    image = next(
        d["data"]["S3TM_IMAGE"] for d in documents
        if d["kind"] == "ConfigMap" and "S3TM_IMAGE" in d.get("data", {})
    )  # fmt: skip
    pods = []
    for doc in documents:
        name = doc["metadata"]["name"]
        if doc["kind"] in ("Deployment", "Job"):
            pods.append(_pod(name, namespace, doc["spec"]["template"]["spec"], image))
        elif doc["kind"] == "ConfigMap" and name == "airflow-pod-template":
            template = yaml.safe_load(doc["data"]["pod-template.yaml"])
            pods.append(_pod("airflow-task", namespace, template["spec"], image))
        elif doc["kind"] == "ConfigMap" and name == "s3tm-spark-pod-templates":
            for file, text in doc["data"].items():
                template = yaml.safe_load(text)
                template["spec"].setdefault("serviceAccountName", "spark")
                pods.append(_pod(f"remap-{file[:-5]}", namespace, template["spec"], image))
        elif doc["kind"] == "SparkApplication":
            pods.extend(_spark_application_pods(doc, namespace))
    return pods


def _dry_run_create(server, manifest: dict, *argv: str):
    return server.kubectl(
        "create", "--dry-run=server", "-o", "name", "-f", "-", *argv,
        check=False, input_text=json.dumps(manifest),
    )  # fmt: skip


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_pod_is_admitted_under_pod_security_restricted(kube_apiserver, overlay):
    documents = _applied(kube_apiserver, overlay)
    namespace = next(d for d in documents if d["kind"] == "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = _pods_of(documents)
    kinds = {p["metadata"]["name"] for p in pods}
    assert {"airflow-task", "remap-driver", "remap-executor", "s3tm-matcher-driver",
            "s3tm-matcher-executor", "airflow-scheduler", "posts-topic"} <= kinds  # fmt: skip
    refused = {}
    for pod in pods:
        done = _dry_run_create(kube_apiserver, pod)
        if done.returncode != 0:
            refused[pod["metadata"]["name"]] = done.stderr.strip()
    assert not refused, refused


def test_a_pod_without_a_security_context_is_refused(kube_apiserver):
    """The label is enforced: the same task pod without its security contexts is refused,
    and says which rules it broke."""
    documents = _applied(kube_apiserver, "base")
    pod = next(p for p in _pods_of(documents) if p["metadata"]["name"] == "airflow-task")
    pod["spec"].pop("securityContext")
    for container in pod["spec"]["containers"]:
        container.pop("securityContext")
    done = _dry_run_create(kube_apiserver, pod)
    assert done.returncode != 0
    assert 'violates PodSecurity "restricted' in done.stderr, done.stderr
    assert "allowPrivilegeEscalation" in done.stderr and "runAsNonRoot" in done.stderr


# (account, verb, resource, allowed): RBAC alone, asked as the account
CAN_I = [
    # Airflow's task pods: submit drivers, nothing more
    ("s3tm-task", "create", "pods", True),
    ("s3tm-task", "delete", "pods", True),
    ("s3tm-task", "patch", "configmaps", True),  # narrowed by the admission policy below
    ("s3tm-task", "get", "secrets", False),
    ("s3tm-task", "list", "secrets", False),
    ("s3tm-task", "create", "pods/exec", False),
    ("s3tm-task", "patch", "pods", False),
    ("s3tm-task", "delete", "configmaps", False),
    ("s3tm-task", "create", "deployments.apps", False),
    ("s3tm-task", "create", "serviceaccounts/token", False),
    ("s3tm-task", "patch", "roles.rbac.authorization.k8s.io", False),
    ("s3tm-task", "create", "sparkapplications.sparkoperator.k8s.io", False),
    # Spark drivers: their executors' pods and ConfigMap
    ("spark", "create", "pods", True),
    ("spark", "deletecollection", "pods", True),
    ("spark", "create", "configmaps", True),
    ("spark", "update", "pods", False),
    ("spark", "patch", "pods", False),
    ("spark", "create", "services", False),
    ("spark", "delete", "services", False),
    ("spark", "deletecollection", "services", True),  # by label, narrowed by the policy
    ("spark", "create", "persistentvolumeclaims", False),
    ("spark", "get", "secrets", False),
    ("spark", "create", "pods/exec", False),
    # executors: nothing
    ("spark-executor", "get", "pods", False),
    ("spark-executor", "get", "configmaps", False),
    # Airflow: the scheduler starts task pods; the API server reads their logs
    ("airflow-scheduler", "create", "pods", True),
    ("airflow-scheduler", "get", "pods/log", True),
    ("airflow-scheduler", "get", "secrets", False),
    ("airflow-scheduler", "patch", "configmaps", False),
    ("airflow-api-server", "get", "pods/log", True),
    ("airflow-api-server", "create", "pods/exec", False),
    ("airflow-api-server", "create", "pods", False),
    ("airflow-api-server", "get", "secrets", False),
    ("airflow", "get", "pods", False),
    ("s3tm-metrics", "get", "pods", False),
]


def test_each_account_may_do_what_it_needs_and_nothing_it_must_not(kube_apiserver):
    _applied(kube_apiserver, "base")
    wrong = []
    for account, verb, resource, allowed in CAN_I:
        # `can-i VERB pods/log` would ask about a pod named "log": the subresource apart
        kind, _, sub = resource.partition("/")
        done = kube_apiserver.kubectl(
            "auth", "can-i", verb, kind, *([f"--subresource={sub}"] if sub else []), "-n", NS,
            f"--as=system:serviceaccount:{NS}:{account}", check=False,
        )  # fmt: skip
        if (done.stdout.strip() == "yes") != allowed:
            wrong.append((account, verb, resource, done.stdout.strip()))
    assert not wrong, wrong


def _driver_pod(documents: list[dict], **changes) -> dict:
    """A driver pod as spark-submit makes it from the template: the object store's keys as
    environment, Spark's authentication secret as a file."""
    pod = next(p for p in _pods_of(documents) if p["metadata"]["name"] == "remap-driver")
    pod["metadata"]["name"] = "remap-1234-driver"
    pod["metadata"]["labels"] = {"spark-role": "driver"}
    container = pod["spec"]["containers"][0]
    container["env"] = [
        {"name": "AWS_ACCESS_KEY_ID",
         "valueFrom": {"secretKeyRef": {"name": "s3tm-object-store", "key": "AWS_ACCESS_KEY_ID"}}}
    ]  # fmt: skip
    container["volumeMounts"].append({"name": "auth", "mountPath": "/etc/s3tm/spark-auth"})
    pod["spec"]["volumes"].append({"name": "auth", "secret": {"secretName": "s3tm-spark-auth"}})
    pod["spec"].update(changes)
    return pod


def _as(account: str) -> str:
    return f"--as=system:serviceaccount:{NS}:{account}"


def test_a_task_starts_spark_drivers_and_nothing_else(kube_apiserver):
    documents = _applied(kube_apiserver, "base")
    allowed = _dry_run_create(kube_apiserver, _driver_pod(documents), _as("s3tm-task"))
    assert allowed.returncode == 0, allowed.stderr
    as_scheduler = _driver_pod(documents, serviceAccountName="airflow-scheduler")
    refused = _dry_run_create(kube_apiserver, as_scheduler, _as("s3tm-task"))
    assert refused.returncode != 0
    assert "s3tm-pod-starters" in refused.stderr and "only as the service account spark" in (
        refused.stderr
    ), refused.stderr
    reads_airflow = _driver_pod(documents)
    reads_airflow["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "s3tm-airflow"}}]
    refused = _dry_run_create(kube_apiserver, reads_airflow, _as("s3tm-task"))
    assert refused.returncode != 0 and "read only the Secrets" in refused.stderr, refused.stderr
    mounts_login = _driver_pod(documents)
    mounts_login["spec"]["volumes"].append(
        {"name": "login", "projected": {"sources": [{"secret": {"name": "s3tm-airflow-login"}}]}}
    )
    refused = _dry_run_create(kube_apiserver, mounts_login, _as("s3tm-task"))
    assert refused.returncode != 0 and "read only the Secrets" in refused.stderr, refused.stderr


def test_the_scheduler_and_drivers_start_only_their_own_kind_of_pod(kube_apiserver):
    documents = _applied(kube_apiserver, "base")
    task = next(p for p in _pods_of(documents) if p["metadata"]["name"] == "airflow-task")
    allowed = _dry_run_create(kube_apiserver, task, _as("airflow-scheduler"))
    assert allowed.returncode == 0, allowed.stderr
    with_database = copy.deepcopy(task)
    with_database["spec"]["containers"][0]["envFrom"].append(
        {"secretRef": {"name": "s3tm-airflow"}}
    )
    refused = _dry_run_create(kube_apiserver, with_database, _as("airflow-scheduler"))
    assert refused.returncode != 0 and "read only the Secrets" in refused.stderr, refused.stderr
    executor = next(p for p in _pods_of(documents) if p["metadata"]["name"] == "remap-executor")
    allowed = _dry_run_create(kube_apiserver, executor, _as("spark"))
    assert allowed.returncode == 0, allowed.stderr
    executor["spec"]["serviceAccountName"] = "spark"
    refused = _dry_run_create(kube_apiserver, executor, _as("spark"))
    assert refused.returncode != 0 and "spark-executor" in refused.stderr, refused.stderr


def test_a_task_changes_only_what_a_driver_pod_owns(kube_apiserver, tmp_path):
    _applied(kube_apiserver, "base")
    patch = ["-p", '{"data": {"S3TM_LAKEHOUSE": "s3://elsewhere/main"}}']
    for kind, name, body in (
        ("configmap", "s3tm-config", patch),
        ("configmap", "airflow-pod-template", patch),
        ("service", "airflow-api-server", ["-p", '{"spec": {"type": "NodePort"}}']),
    ):
        refused = kube_apiserver.kubectl(
            "patch", kind, name, "-n", NS, "--dry-run=server", *body, _as("s3tm-task"),
            check=False,
        )  # fmt: skip
        assert refused.returncode != 0, (kind, name)
        assert "only the objects a Spark driver pod owns" in refused.stderr, refused.stderr
    # a NetworkPolicy of the platform's (prod's lockdown), applied server-side as Spark does
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": "airflow-api-server", "namespace": NS},
              "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}  # fmt: skip
    kube_apiserver.kubectl("apply", "--server-side", "-f", "-", input_text=json.dumps(policy))
    policy["spec"]["ingress"] = [{}]
    refused = kube_apiserver.kubectl(
        "apply", "--server-side", "--dry-run=server", "-f", "-", _as("s3tm-task"),
        check=False, input_text=json.dumps(policy),
    )  # fmt: skip
    assert refused.returncode != 0 and "Spark driver pod owns" in refused.stderr, refused.stderr
    # spark-submit's own: the driver's ConfigMap, owned by its pod
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "remap-1234-driver",
             "uid": "7a0c6c36-5d8e-4a57-9d7f-0c2f7d8e1a11"}  # fmt: skip
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "spark-drv-1234-conf-map", "namespace": NS,
                           "ownerReferences": [owner]},
              "data": {"spark.properties": "spark.app.name=remap"}}  # fmt: skip
    allowed = kube_apiserver.kubectl(
        "apply", "--server-side", "--dry-run=server", "-f", "-", _as("s3tm-task"),
        check=False, input_text=json.dumps(config),
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr


def test_a_task_deletes_only_spark_drivers(kube_apiserver):
    documents = _applied(kube_apiserver, "base")
    pods = {p["metadata"]["name"]: p for p in _pods_of(documents)}
    driver = _driver_pod(documents)
    for pod in (pods["s3tm-metrics"], driver):
        kube_apiserver.kubectl("apply", "--server-side", "-f", "-", input_text=json.dumps(pod))
    try:
        refused = kube_apiserver.kubectl(
            "delete", "pod", "s3tm-metrics", "-n", NS, "--dry-run=server", _as("s3tm-task"),
            check=False,
        )  # fmt: skip
        assert refused.returncode != 0 and "only Spark driver pods" in refused.stderr, (
            refused.stderr
        )
        allowed = kube_apiserver.kubectl(
            "delete", "pod", driver["metadata"]["name"], "-n", NS, "--dry-run=server",
            _as("s3tm-task"), check=False,
        )  # fmt: skip
        assert allowed.returncode == 0, allowed.stderr
    finally:
        kube_apiserver.kubectl(
            "delete", "pod", "s3tm-metrics", driver["metadata"]["name"], "-n", NS,
            "--ignore-not-found", "--wait=false",
        )  # fmt: skip


def test_a_driver_deletes_only_a_spark_applications_objects(kube_apiserver):
    """The driver's Role may delete collections (Spark 4 cleans up by label as it stops):
    the policy lets it delete what a Spark application labelled, never a platform
    object, one by one or in a collection."""
    _applied(kube_apiserver, "base")
    own = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "spark-exec-1234-conf-map", "namespace": NS,
                        "labels": {"spark-app-selector": "spark-1234"}}}  # fmt: skip
    kube_apiserver.kubectl("apply", "--server-side", "-f", "-", input_text=json.dumps(own))
    try:
        allowed = kube_apiserver.kubectl(
            "delete", "configmap", "spark-exec-1234-conf-map", "-n", NS, "--dry-run=server",
            _as("spark"), check=False,
        )  # fmt: skip
        assert allowed.returncode == 0, allowed.stderr
        refused = _once_in_force(
            kube_apiserver, "delete", "configmap", "s3tm-config", "-n", NS, "--dry-run=server",
            _as("spark"), refusal="Spark application's objects",
        )  # fmt: skip
        assert refused.returncode != 0 and "Spark application's objects" in refused.stderr, (
            refused.stderr
        )
        # a collection (one DELETE of the resource, as Spark sends it): the platform's
        # Services (the API server's among them) are each refused
        refused = kube_apiserver.kubectl(
            "delete", "--raw", f"/api/v1/namespaces/{NS}/services?dryRun=All", _as("spark"),
            check=False,
        )  # fmt: skip
        assert refused.returncode != 0 and "Spark application's objects" in refused.stderr, (
            refused.stderr
        )
    finally:
        kube_apiserver.kubectl("delete", "configmap", "spark-exec-1234-conf-map", "-n", NS,
                               "--ignore-not-found")  # fmt: skip
