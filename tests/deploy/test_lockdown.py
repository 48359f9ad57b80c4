"""Production locked down (docs/DEPLOY.md, "Locked down"): who may reach the platform's pods
(NetworkPolicies, evaluated by tests/deploy/network_policy.py on the pods prod renders,
Airflow's included), and what prod's Spark processes and credentials require."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.kustomized import conf_settings, rendered, spark_defaults, task_pod
from tests.deploy.network_policy import Pod, isolated, reaches

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "infra" / "k8s"


def _monitoring_namespace() -> str:
    """The namespace DEPLOY.md installs kube-prometheus-stack into."""
    docs = (REPO / "docs" / "DEPLOY.md").read_text()
    line = next(x for x in docs.splitlines() if "--install kube-prometheus-stack" in x)
    following = docs[docs.index(line) :].split("\n", 2)[:2]
    found = re.search(r"-n (\S+)", " ".join(following))
    assert found, line
    return found.group(1)


def _platform_pods(documents: list[dict]) -> dict[str, Pod]:
    """Every pod prod starts, with the labels Kubernetes and Spark give it."""
    namespace = next(d["metadata"]["name"] for d in documents if d["kind"] == "Namespace")
    pods: dict[str, Pod] = {}
    for doc in documents:
        name = doc["metadata"]["name"]
        if doc["kind"] == "Deployment":
            pods[name] = Pod(namespace, doc["spec"]["template"]["metadata"]["labels"])
        elif doc["kind"] == "Job":
            labels = doc["spec"]["template"].get("metadata", {}).get("labels", {})
            pods[name] = Pod(namespace, {**labels, "batch.kubernetes.io/job-name": name,
                                         "job-name": name})  # fmt: skip
        elif doc["kind"] == "SparkApplication":
            for role in ("driver", "executor"):
                labels = doc["spec"][role].get("labels", {})
                pods[f"{name}-{role}"] = Pod(namespace, {**labels, "spark-role": role})
    # Airflow's task pods, which the KubernetesExecutor starts from its template
    pods["airflow-task"] = Pod(namespace, task_pod(documents)["metadata"]["labels"])
    # the remap jobs' pods, which spark-submit starts from Airflow's task pods
    for role in ("driver", "executor"):
        pods[f"remap-{role}"] = Pod(namespace, {"spark-role": role, "spark-app-name": "s3tm-learn"})
    return pods


@pytest.fixture(scope="module")
def prod() -> list[dict]:
    return rendered(K8S / "overlays" / "prod")


def test_every_platform_pod_in_prod_accepts_only_what_a_policy_allows(prod) -> None:
    policies = [d for d in prod if d["kind"] == "NetworkPolicy"]
    pods = _platform_pods(prod)
    assert {"s3tm-metrics", "posts-topic", "s3tm-matcher-driver", "remap-driver"} <= pods.keys()
    open_pods = [name for name, pod in pods.items() if not isolated(policies, pod)]
    assert not open_pods, f"no NetworkPolicy selects {open_pods}"


def test_prometheus_reaches_what_it_scrapes_and_nothing_else(prod) -> None:
    policies = [d for d in prod if d["kind"] == "NetworkPolicy"]
    pods = _platform_pods(prod)
    prometheus = Pod(_monitoring_namespace(), {"app.kubernetes.io/name": "prometheus"})
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in prod}
    service = by_kind[("Service", "s3tm-metrics")]
    containers = by_kind[("Deployment", "s3tm-metrics")]["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for c in containers for p in c["ports"]}
    target = service["spec"]["ports"][0]["targetPort"]
    exporter_port = ports[target] if isinstance(target, str) else target
    assert reaches(policies, prometheus, pods["s3tm-metrics"], exporter_port)
    ui_port = 4040  # the driver's UI, where the PodMonitor reads Spark's servlets
    assert reaches(policies, prometheus, pods["s3tm-matcher-driver"], ui_port)
    # not the driver's RPC port, the executors, the remap drivers or the topic job
    assert not reaches(policies, prometheus, pods["s3tm-matcher-driver"], 7078)
    assert not reaches(policies, prometheus, pods["s3tm-matcher-executor"], ui_port)
    assert not reaches(policies, prometheus, pods["remap-driver"], ui_port)
    assert not reaches(policies, prometheus, pods["posts-topic"], ui_port)
    # the same labels in another namespace are not Prometheus
    elsewhere = Pod("default", prometheus.labels)
    assert not reaches(policies, elsewhere, pods["s3tm-metrics"], exporter_port)


def test_spark_pods_reach_each_other_and_airflow_reaches_none(prod) -> None:
    policies = [d for d in prod if d["kind"] == "NetworkPolicy"]
    pods = _platform_pods(prod)
    for app in ("s3tm-matcher", "remap"):
        driver, executor = pods[f"{app}-driver"], pods[f"{app}-executor"]
        for port in (7078, 7079, 40000):  # RPC, block manager, a shuffle port
            assert reaches(policies, executor, driver, port)
            assert reaches(policies, driver, executor, port)
    # Airflow's pods share the namespace; spark-submit in cluster mode calls the API server
    for caller in (pods["airflow-api-server"], pods["airflow-task"]):
        for name in ("s3tm-matcher-driver", "remap-driver", "s3tm-metrics"):
            assert not reaches(policies, caller, pods[name], 4040 if "driver" in name else 9108)


def test_airflow_opens_its_ui_to_the_ingress_controller_and_its_logs_to_its_api_server(prod):
    """The API server: the ingress controller's namespace and Airflow's own pods (the
    execution API the tasks report to) on its port, nobody else; the other Airflow pods:
    the API server on their log ports only; statsd-exporter: StatsD from Airflow, its series
    to Prometheus."""
    policies = [d for d in prod if d["kind"] == "NetworkPolicy"]
    pods = _platform_pods(prod)
    namespace = pods["airflow-api-server"].namespace
    ingress = Pod("ingress-nginx", {"app.kubernetes.io/name": "ingress-nginx"})
    stranger = Pod("default", {"app.kubernetes.io/name": "ingress-nginx"})
    neighbour = Pod(namespace, {"app": "something-else"})
    api, task = pods["airflow-api-server"], pods["airflow-task"]
    assert reaches(policies, ingress, api, 8080) and reaches(policies, task, api, 8080)
    assert not reaches(policies, stranger, api, 8080)
    assert not reaches(policies, neighbour, api, 8080)
    assert not reaches(policies, pods["s3tm-matcher-driver"], api, 8080)
    assert reaches(policies, api, task, 8793)
    assert reaches(policies, api, pods["airflow-triggerer"], 8794)
    for name in ("airflow-scheduler", "airflow-dag-processor", "airflow-triggerer", "airflow-task"):
        assert not reaches(policies, ingress, pods[name], 8793)
        assert not reaches(policies, task, pods[name], 8794)
    prometheus = Pod(_monitoring_namespace(), {"app.kubernetes.io/name": "prometheus"})
    assert reaches(policies, prometheus, pods["airflow-statsd"], 9102)
    assert not reaches(policies, neighbour, pods["airflow-statsd"], 9102)


SECURE_RPC = {
    "spark.authenticate": "true",
    "spark.network.crypto.enabled": "true",
    "spark.io.encryption.enabled": "true",
    # the secret a file of the Secret s3tm-spark-auth, in drivers and executors: Spark's
    # generated one would be an executor pod's environment variable (`get pods` shows it)
    # (one key: the driver's and executors' fall back to it, and an executor's first
    # connection, before it has the driver's settings, reads only this one)
    "spark.authenticate.secret.file": "/etc/s3tm/spark-auth/secret",
    "spark.kubernetes.driver.secrets.s3tm-spark-auth": "/etc/s3tm/spark-auth",
    "spark.kubernetes.executor.secrets.s3tm-spark-auth": "/etc/s3tm/spark-auth",
}


def _chain() -> str:
    from spark_jobs.lake.session import S3A_CREDENTIALS_PROVIDERS

    return ",".join(S3A_CREDENTIALS_PROVIDERS)


@pytest.mark.parametrize("target", ["base", "overlays/dev", "overlays/prod"])
def test_spark_on_kubernetes_authenticates_and_encrypts_and_reads_the_default_chain(target):
    """The remap jobs' spark-defaults and the matcher's sparkConf, in every overlay: RPC
    authenticated and encrypted, local shuffle files encrypted, S3A's credentials from the
    platform's chain (the environment's keys first, else the pod's identity), as in the
    image's own spark-defaults.conf and the local sessions (spark_jobs/lake/session.py)."""
    documents = rendered(K8S / target)
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    remap = spark_defaults(documents)
    matcher = by_kind[("SparkApplication", "s3tm-matcher")]["spec"]["sparkConf"]
    image = conf_settings((REPO / "docker" / "spark-defaults.conf").read_text())
    provider = "spark.hadoop.fs.s3a.aws.credentials.provider"
    for conf in (remap, matcher):
        assert SECURE_RPC.items() <= conf.items(), conf
        assert conf[provider] == _chain()
    assert image[provider] == _chain()


def _secret_refs(node: object) -> list[dict]:
    if isinstance(node, dict):
        found = [node["secretRef"]] if isinstance(node.get("secretRef"), dict) else []
        return found + [r for v in node.values() for r in _secret_refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _secret_refs(v)]
    if isinstance(node, str) and "secretRef" in node:
        try:  # a file in a ConfigMap (a pod template); an admission rule's CEL is not YAML
            return _secret_refs(yaml.safe_load(node))
        except yaml.YAMLError:
            return []
    return []


def test_prod_reads_the_lakehouse_with_the_pods_identity(prod) -> None:
    """prod (AWS S3) needs no static keys: its Spark pods name none, and every reference to
    the keys' Secret (matcher, exporter, Airflow's containers) is optional, so that pods start
    without it and every S3 client takes the pod's identity. DEPLOY.md binds the role
    to each service account whose pods read the lakehouse."""
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in prod}
    remap = by_kind[("ConfigMap", "s3tm-spark-defaults")]["data"]["spark-defaults.conf"]
    assert "s3tm-object-store" not in remap
    refs = [r for r in _secret_refs(prod) if r["name"] == "s3tm-object-store"]
    assert len(refs) >= 4 and all(r.get("optional") is True for r in refs), refs
    # dev keeps MinIO's static keys
    dev = rendered(K8S / "overlays" / "dev")
    dev_remap = next(d for d in dev if d["metadata"]["name"] == "s3tm-spark-defaults")
    assert "secretKeyRef.AWS_ACCESS_KEY_ID" in dev_remap["data"]["spark-defaults.conf"]
    # the service accounts whose pods read the lakehouse, each named where DEPLOY binds the role
    # (Airflow's API server: the run reports' tab reads them)
    templates = by_kind[("ConfigMap", "s3tm-spark-pod-templates")]["data"]
    executor = yaml.safe_load(templates["executor.yaml"])["spec"]["serviceAccountName"]
    accounts = {"spark", executor, task_pod(prod)["spec"]["serviceAccountName"]}
    for name in ("s3tm-metrics", "airflow-api-server"):
        accounts.add(
            by_kind[("Deployment", name)]["spec"]["template"]["spec"]["serviceAccountName"]
        )
    assert all(("ServiceAccount", a) in by_kind for a in accounts), accounts
    # the role on each of them, declared in the overlay (a pod reads it when it is created,
    # so it is there before the first pod); the registry's pull secret on every account
    role = "eks.amazonaws.com/role-arn"
    annotated = {
        name for (kind, name), d in by_kind.items()
        if kind == "ServiceAccount" and role in d["metadata"].get("annotations", {})
    }  # fmt: skip
    assert annotated == accounts, annotated ^ accounts
    pulls = [d.get("imagePullSecrets") for d in prod if d["kind"] == "ServiceAccount"]
    assert pulls and all(p == [{"name": "s3tm-registry"}] for p in pulls), pulls


def test_prod_reaches_kafka_over_tls_with_sasl_wherever_it_reads_it(prod) -> None:
    """prod's brokers want TLS and SCRAM: s3tm-config says so once, complete (the clients'
    own validation accepts it), and every pod that talks to Kafka gets the credentials'
    Secret and the CA's certificate where KAFKA_SSL_CA_FILE points: the matcher's driver
    and executors, the topic Job, and the remap jobs' drivers (the ingest) and executors."""
    from s3tm.orchestration.dag_support import FORWARDED_ENV
    from spark_jobs.kafka_security import ENV_PASSWORD, ENV_USERNAME, KafkaSecurity

    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in prod}
    config = by_kind[("ConfigMap", "s3tm-config")]["data"]
    ca_file = config["KAFKA_SSL_CA_FILE"]
    ca_dir, ca_key = ca_file.rsplit("/", 1)
    settings = {k: v for k, v in config.items() if k.startswith("KAFKA_")}
    credentials = {ENV_USERNAME: "s3tm", ENV_PASSWORD: "x"}
    # (the CA's path is inside the pods: not checked for a file here)
    security = KafkaSecurity.from_env({**settings, **credentials, "KAFKA_SSL_CA_FILE": ""})
    assert security.protocol == "SASL_SSL" and security.sasl_mechanism
    # the non-secret settings reach the remap jobs' drivers and executors from the task pod
    assert {k for k in settings if k != "KAFKA_BOOTSTRAP"} <= set(FORWARDED_ENV)

    def mounts_ca(volumes: list[dict], mounts: list[dict]) -> bool:
        secret = {v["name"] for v in volumes if v.get("secret", {}).get("secretName")
                  == "s3tm-kafka-ca"}  # fmt: skip
        return any(m["name"] in secret and m["mountPath"] == ca_dir for m in mounts)

    matcher = by_kind[("SparkApplication", "s3tm-matcher")]["spec"]
    for role in ("driver", "executor"):
        assert {"name": "s3tm-kafka"} in [r.get("secretRef") for r in matcher[role]["envFrom"]]
        assert mounts_ca(matcher["volumes"], matcher[role]["volumeMounts"]), role
    job = by_kind[("Job", "posts-topic")]["spec"]["template"]["spec"]
    container = job["containers"][0]
    assert {"name": "s3tm-kafka"} in [r.get("secretRef") for r in container["envFrom"]]
    assert mounts_ca(job["volumes"], container["volumeMounts"])
    remap = spark_defaults(prod)
    for name in (ENV_USERNAME, ENV_PASSWORD):
        assert remap[f"spark.kubernetes.driver.secretKeyRef.{name}"] == f"s3tm-kafka:{name}"
    for role in ("driver", "executor"):
        assert remap[f"spark.kubernetes.{role}.secrets.s3tm-kafka-ca"] == ca_dir
    assert ca_key == "ca.crt"  # the key DEPLOY.md creates the CA's Secret with
    assert "--from-file=ca.crt=" in (REPO / "docs" / "DEPLOY.md").read_text()
