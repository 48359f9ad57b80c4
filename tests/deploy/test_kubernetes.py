"""infra/ validated offline: the kustomize overlays rendered (``kubectl kustomize``, when
kubectl is on the machine) and every resource checked against Kubernetes' own OpenAPI
schemas (kubernetes-validate, from PyPI); the Spark operator's SparkApplication, whose
CRD schema is not packaged, is checked for what the matcher relies on."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.deploy.kustomized import rendered, spark_defaults

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "infra" / "k8s"
KUBERNETES_VERSION = "1.31.0"
OVERLAYS = ("dev", "prod")


def _validate(documents: list[dict]) -> list[str]:
    """Kinds validated against the Kubernetes schemas; raises on the first invalid one."""
    checked = []
    for doc in documents:
        if doc["apiVersion"].startswith("sparkoperator.k8s.io/"):
            _check_spark_application(doc)
        elif doc["kind"] == "PrometheusRule":
            _check_prometheus_rule(doc)
        elif doc["apiVersion"].startswith("monitoring.coreos.com/"):
            # ServiceMonitor, PodMonitor: their CRDs' schemas check them (make k8s-check)
            assert doc["kind"] in ("ServiceMonitor", "PodMonitor"), doc["kind"]
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        checked.append(doc["kind"])
    return checked


def _check_spark_application(app: dict) -> None:
    spec = app["spec"]
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and app["kind"] == "SparkApplication"
    assert spec["type"] == "Python" and spec["mode"] == "cluster"
    assert spec["mainApplicationFile"].startswith("local:///")  # inside the image
    assert spec["mainApplicationFile"].endswith("spark_jobs/stream/job.py")
    assert spec["restartPolicy"]["type"] == "Always"
    arguments = spec["arguments"]
    assert arguments[0] == "run" and arguments[arguments.index("--source") + 1] == "kafka"
    # the checkpoint defaults to <lakehouse>/_checkpoints/<query>: on the object store of
    # S3TM_LAKEHOUSE (s3tm-config), so it survives the driver pod
    assert "--checkpoint" not in arguments
    for role in ("driver", "executor"):
        refs = {next(iter(r.values()))["name"] for r in spec[role]["envFrom"]}
        assert refs >= {"s3tm-config", "s3tm-object-store"}  # prod: Kafka's credentials too
        assert isinstance(spec[role]["cores"], int) and spec[role]["memory"].endswith("g")
    assert spec["driver"]["serviceAccount"] == "spark"
    assert isinstance(spec["executor"]["instances"], int)


def _check_prometheus_rule(rule: dict) -> None:
    """The Prometheus Operator's CRD schema is not packaged either: the rule must be the
    project's rule file, group for group."""
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    rules = yaml.safe_load((REPO / "infra" / "monitoring" / "s3tm-alerts.yml").read_text())
    assert rule["spec"]["groups"] == rules["groups"]


def test_the_prometheus_rule_is_the_rule_filerendered() -> None:
    from tests.deploy.prometheus_rule import TARGET, render

    assert TARGET.read_text() == render(), (
        "infra/k8s/components/monitoring/prometheus-rule.yaml is stale: "
        "python -m tests.deploy.prometheus_rule > it"
    )


def test_the_exporter_is_scraped_by_annotation_and_runs_the_platform_image() -> None:
    documents = _documents(K8S / "base" / "metrics.yaml")
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    container = pod["spec"]["containers"][0]
    command = container["command"]
    assert command[:3] == ["s3tm", "metrics", "serve"]
    assert annotations["prometheus.io/port"] == command[command.index("--port") + 1]
    matcher = yaml.safe_load((K8S / "base" / "matcher.yaml").read_text())
    assert container["image"] == matcher["spec"]["image"]
    assert matcher["spec"]["sparkConf"]["spark.ui.prometheus.enabled"] == "true"


def _documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_base_manifests_are_valid_kubernetes():
    documents = []
    for path in sorted((K8S / "base").glob("*.yaml")):
        if path.name not in ("kustomization.yaml", "kustomizeconfig.yaml"):
            documents += _documents(path)
    kinds = _validate(documents)
    assert {"Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Job",
            "SparkApplication"} <= set(kinds)  # fmt: skip


def test_an_invalid_manifest_is_refused():
    job = next(d for d in _documents(K8S / "base" / "kafka-topic-job.yaml"))
    job["spec"]["backoffLimit"] = "ten"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (kustomize) not installed")
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_overlays_are_valid_and_sized(overlay):
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    _validate(documents)
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    app = by_kind[("SparkApplication", "s3tm-matcher")]["spec"]
    topic = by_kind[("Job", "posts-topic")]["spec"]["template"]["spec"]["containers"][0]
    config = by_kind[("ConfigMap", "s3tm-config")]["data"]
    # N is said once, in s3tm-config: the topic's partitions and the remap's `nodes`
    source = next(e for e in topic["env"] if e["name"] == "POSTS_PARTITIONS")["valueFrom"]
    assert source["configMapKeyRef"]["key"] == "S3TM_MATCHERS"
    partitions = int(config["S3TM_MATCHERS"])
    slots = app["executor"]["instances"] * app["executor"]["cores"]
    # N matchers = Kafka partitions = route tasks; at least one task slot per matcher
    # partition in prod, and the shuffle partitions follow N
    assert int(app["sparkConf"]["spark.sql.shuffle.partitions"]) == partitions
    assert slots <= partitions
    if overlay == "prod":
        assert slots == partitions == 64
    config = by_kind[("ConfigMap", "s3tm-config")]["data"]
    assert config["S3TM_LAKEHOUSE"].startswith("s3://")
    # an empty value is not an unset one (delta-rs, pyarrow and boto3 read "" as set)
    assert all(value != "" for value in config.values()), config
    # the local state folder is the image's, as compose sets it
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    assert config["S3TM_STATE_DIR"] == compose["x-object-store-env"]["S3TM_STATE_DIR"]
    assert ("AWS_ENDPOINT_URL" in config) == (overlay == "dev")  # MinIO in dev, AWS in prod
    namespaces = {d["metadata"].get("namespace") for d in documents if d["kind"] != "Namespace"}
    assert len(namespaces) == 1
    # the Python workers live outside the JVM heap: each executor core's worker gets room in
    # the memory overhead (prod: 1M subscriptions a worker with the trie, 1.2 GiB each)
    overhead = _gib(app["executor"]["memoryOverhead"])
    assert overhead >= (1.2 if overlay == "prod" else 0.5) * app["executor"]["cores"], app
    defaults = by_kind[("ConfigMap", "s3tm-spark-defaults")]["data"]["spark-defaults.conf"]
    assert "spark.executor.memoryOverhead" in defaults


def _gib(size: str) -> float:
    units = {"g": 1.0, "m": 1 / 1024}
    return float(size[:-1]) * units[size[-1].lower()]


def test_one_images_entry_retags_every_platform_pod_and_the_matcher_reads_the_config(tmp_path):
    """An overlay's `images:` reaches the SparkApplication too, and no manifest names the
    platform image, a broker or a bucket that s3tm-config does not."""
    import shutil

    copy = tmp_path / "k8s"
    shutil.copytree(K8S, copy)
    retag = copy / "overlays" / "retag"
    retag.mkdir()
    (retag / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ../dev\nimages:\n  - name: s3tm/platform\n    newTag: 9.9.9\n"
    )
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(retag)], capture_output=True, text=True, check=False
    )
    assert rendered.returncode == 0, rendered.stderr
    text = rendered.stdout
    assert "s3tm/platform:9.9.9" in text and "s3tm/platform:0" not in text
    documents = [d for d in yaml.safe_load_all(text) if d]
    app = next(d for d in documents if d["kind"] == "SparkApplication")["spec"]
    arguments = " ".join(app["arguments"])
    assert "kafka" in arguments and "s3a://" not in arguments and ".svc" not in arguments
    assert app["executor"]["memoryOverhead"]
    config = next(d for d in documents if d["metadata"]["name"] == "s3tm-config")["data"]
    assert {"KAFKA_BOOTSTRAP", "POSTS_TOPIC", "S3TM_LAKEHOUSE"} <= set(config)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (kustomize) not installed")
def test_the_runbook_namespace_is_the_one_each_overlay_renders():
    """DEPLOY.md's commands name the namespace as $NS, set beside the overlay it goes with:
    following them with either overlay creates the secrets and Airflow where the platform is."""
    import re

    docs = "\n".join((REPO / "docs" / name).read_text() for name in ("DEPLOY.md", "OPERATIONS.md"))
    pairs = dict(re.findall(r"OVERLAY=(\w+) NS=([\w-]+)", docs))
    assert set(pairs) == set(OVERLAYS), pairs
    for overlay, namespace in pairs.items():
        rendered = subprocess.run(
            ["kubectl", "kustomize", str(K8S / "overlays" / overlay)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        namespaces = {
            d["metadata"]["name"] if d["kind"] == "Namespace" else d["metadata"].get("namespace")
            for d in yaml.safe_load_all(rendered)
            if d
        }
        assert namespaces == {namespace}, (overlay, namespaces)
    # every namespaced command of the docs uses it, none a literal namespace (but the
    # operators' own, which their installs create)
    platform = re.sub(r"--create-namespace\s*(\\\n\s*)?-n \S+", "", docs)
    assert re.findall(r"(?:kubectl|helm)[^\n]* -n (?!\"\$NS\")\S+", platform) == []
    assert '\\"namespace\\": \\"$NS\\"' in docs  # the Spark connection's namespace


def test_airflow_on_kubernetes_has_the_login_compose_has():
    """The chart's values define the admin user as compose does (simple auth manager), its
    password from a Secret mounted where the passwords file is read."""
    values = yaml.safe_load((REPO / "infra" / "helm" / "airflow-values.yaml").read_text())
    core = values["config"]["core"]
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())["x-airflow-env"]
    role = compose["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(":")[-1]
    assert core["simple_auth_manager_users"] == f"admin:{role}"
    mounts = values["apiServer"]["extraVolumeMounts"]
    passwords = core["simple_auth_manager_passwords_file"]
    mount = next(m for m in mounts if passwords.startswith(m["mountPath"] + "/"))
    volume = next(v for v in values["apiServer"]["extraVolumes"] if v["name"] == mount["name"])
    secret = volume["secret"]["secretName"]
    runbook = (REPO / "docs" / "DEPLOY.md").read_text()
    assert f"create secret generic {secret}" in runbook and "passwords.json" in runbook
    assert values["config"]["metrics"]["statsd_on"] == "True" and values["statsd"]["enabled"]
    # the manager those settings are for, named (the chart's default is FAB's, not in the
    # image) and importable; the chart's FAB create-user job (admin/admin) off
    module, _, name = core["auth_manager"].rpartition(".")
    manager = getattr(importlib.import_module(module), name)
    assert manager.__name__ == "SimpleAuthManager"
    assert values["webserver"]["defaultUser"]["enabled"] is False


def test_the_prometheus_operator_scrapes_what_the_alerts_match() -> None:
    """The Prometheus Operator ignores prometheus.io/* annotations: prod ships a
    ServiceMonitor for the exporter's Service (job label = the Service's name, the job the
    exporter alerts match, as compose's scrape job) and a PodMonitor for the matcher
    driver's Spark servlets on its UI port, which the driver turns on."""
    documents = rendered(K8S / "overlays" / "prod")
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    service = by_kind[("Service", "s3tm-metrics")]
    monitor = by_kind[("ServiceMonitor", "s3tm-metrics")]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {
        p["name"] for p in service["spec"]["ports"]
    }
    rules = yaml.safe_load((REPO / "infra" / "monitoring" / "s3tm-alerts.yml").read_text())
    exporter = {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}
    job = f'job="{service["metadata"]["name"]}"'
    assert job in exporter["S3TMExporterDown"] and job in exporter["S3TMExporterNotScraped"]
    assert exporter["S3TMExporterNotScraped"].startswith("absent(")
    compose = yaml.safe_load((REPO / "infra" / "monitoring" / "prometheus-compose.yml").read_text())
    jobs = {j["job_name"]: j for j in compose["scrape_configs"]}
    assert jobs[service["metadata"]["name"]]["static_configs"][0]["targets"] == ["metrics:9108"]
    matcher = by_kind[("SparkApplication", "s3tm-matcher")]["spec"]["driver"]
    pods = by_kind[("PodMonitor", "s3tm-matcher-driver")]["spec"]
    assert pods["selector"]["matchLabels"].items() <= matcher["labels"].items()
    assert {"name": "S3TM_SPARK_UI", "value": "true"} in matcher["env"]
    assert {e["path"] for e in pods["podMetricsEndpoints"]} == {
        "/metrics/prometheus",
        "/metrics/executors/prometheus",
    }


def test_the_operators_default_selectors_pick_the_rules_and_monitors_up() -> None:
    """kube-prometheus-stack's Prometheus loads only the PrometheusRules, ServiceMonitors and
    PodMonitors labelled ``release: <its release>`` (its default ruleSelector and monitor
    selectors); DEPLOY.md names the release the label assumes."""
    documents = rendered(K8S / "overlays" / "prod")
    operator_kinds = [d for d in documents if d["apiVersion"].startswith("monitoring.coreos.com/")]
    assert {d["kind"] for d in operator_kinds} == {"PrometheusRule", "ServiceMonitor", "PodMonitor"}
    releases = {d["metadata"]["labels"].get("release") for d in operator_kinds}
    assert len(releases) == 1 and None not in releases, releases
    (release,) = releases
    assert f"--install {release} " in (REPO / "docs" / "DEPLOY.md").read_text()
    # the label is no selector: the monitors still select the project's own pods
    for monitor in (d for d in operator_kinds if d["kind"] != "PrometheusRule"):
        assert "release" not in monitor["spec"]["selector"]["matchLabels"]


def test_an_overlays_runbook_setting_becomes_every_alerts_runbook_url(tmp_path) -> None:
    """The alerts' runbook_url is S3TM_RUNBOOK of s3tm-config (one setting) with each
    alert's anchor kept: prod's literals naming where the team serves the page, as DEPLOY.md
    tells a team to set them (a copy of infra/k8s, edited)."""
    page = "https://git.example.org/team/s3tm/-/blob/main/docs/OPERATIONS.md"
    shutil.copytree(K8S, tmp_path / "k8s")
    prod = tmp_path / "k8s" / "overlays" / "prod" / "kustomization.yaml"
    text = prod.read_text()
    literal = "      - S3TM_MATCHERS=64\n"
    assert literal in text
    prod.write_text(text.replace(literal, f"{literal}      - S3TM_RUNBOOK={page}\n"))
    documents = rendered(tmp_path / "k8s" / "overlays" / "prod")
    rule = next(d for d in documents if d["kind"] == "PrometheusRule")
    rules = yaml.safe_load((REPO / "infra" / "monitoring" / "s3tm-alerts.yml").read_text())
    expected = {
        r["alert"]: page + "#" + r["annotations"]["runbook_url"].split("#", 1)[1]
        for g in rules["groups"] for r in g["rules"] if "alert" in r
    }  # fmt: skip
    got = {
        r["alert"]: r["annotations"]["runbook_url"]
        for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r
    }  # fmt: skip
    assert got == expected and len(got) >= 8


def _secrets_named(node: object) -> set[str]:
    """Every Secret a manifest or the chart's values name: ``secretName``/``*SecretName``
    values, ``secretRef``/``secretKeyRef`` names (the values' templated strings parsed)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("secretRef", "secretKeyRef") and isinstance(value, dict):
                found.add(value["name"])
            elif (key == "secretName" or key.endswith("SecretName")) and isinstance(value, str):
                found.add(value)
            else:
                found |= _secrets_named(value)
    elif isinstance(node, list):
        for item in node:
            found |= _secrets_named(item)
    elif isinstance(node, str) and "secretRef" in node:
        found |= _secrets_named(yaml.safe_load(node))
    return found


def test_deploy_creates_every_secret_after_its_namespace_and_before_the_chart() -> None:
    """DEPLOY.md's Kubernetes commands create each Secret the chart's values and the
    overlays name, after `kubectl apply` made the namespace and before `helm upgrade`
    (the chart's hook jobs read them and do not wait)."""
    values = yaml.safe_load((REPO / "infra" / "helm" / "airflow-values.yaml").read_text())
    needed = _secrets_named(values)
    for overlay in OVERLAYS:
        needed |= _secrets_named(rendered(K8S / "overlays" / overlay))
    assert {"s3tm-airflow-metadata", "s3tm-object-store", "s3tm-airflow-login"} <= needed
    docs = (REPO / "docs" / "DEPLOY.md").read_text()
    section = docs[docs.index("## 3. Kubernetes") :]
    lines = section[: section.index("\n## ")].splitlines()
    apply = next(i for i, line in enumerate(lines) if line.startswith("kubectl apply -k"))
    chart = next(i for i, line in enumerate(lines) if "apache-airflow/airflow" in line)
    created = {
        m.group(1): i
        for i, line in enumerate(lines)
        if (m := re.search(r"create secret generic (\S+)", line))
    }
    assert needed <= created.keys(), needed - created.keys()
    assert all(apply < created[name] < chart for name in needed), (apply, created, chart)


def test_task_pods_submit_spark_jobs_with_no_more_than_a_submission_needs() -> None:
    """Airflow's task pods run as their own service account, not the drivers' `spark`: its
    Role creates, watches and deletes driver pods and creates their Service and ConfigMap,
    nothing else; the drivers keep theirs (executors)."""
    values = yaml.safe_load((REPO / "infra" / "helm" / "airflow-values.yaml").read_text())
    account = values["workers"]["serviceAccount"]
    assert account["create"] is False and account["name"] != "spark"
    documents = rendered(K8S / "overlays" / "prod")
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    assert ("ServiceAccount", account["name"]) in by_kind
    binding = next(
        d for d in documents
        if d["kind"] == "RoleBinding"
        and any(s["kind"] == "ServiceAccount" and s["name"] == account["name"]
                for s in d["subjects"])
    )  # fmt: skip
    rules = by_kind[("Role", binding["roleRef"]["name"])]["rules"]
    granted = {(r, v) for rule in rules for r in rule["resources"] for v in rule["verbs"]}
    assert granted == {
        *{("pods", v) for v in ("create", "get", "list", "watch", "delete")},
        *{(r, v) for r in ("services", "configmaps") for v in ("create", "get")},
    }
    conf = by_kind[("ConfigMap", "s3tm-spark-defaults")]["data"]["spark-defaults.conf"]
    assert re.search(r"driver\.serviceAccountName\s+spark\n", conf)


def test_prod_sizes_the_remap_jobs_and_keeps_the_rest_of_the_base() -> None:
    """prod's spark-defaults.conf (the remap jobs' drivers and executors) is the base's but
    for its static S3 keys, Kafka's credentials and its sizes: more task slots with shuffle
    partitions to match, and a driver whose memory overhead (where PySpark's Python driver
    lives) holds the remap driver's peak measured at 10M subscriptions (`s3tm bench
    subscriptions`, docs/bench)."""
    import csv

    base = spark_defaults(rendered(K8S / "base"))
    prod = spark_defaults(rendered(K8S / "overlays" / "prod"))
    sizes = {
        k for k in prod if re.search(r"\.(instances|cores|memory\w*|partitions|parallelism)$", k)
    }
    # and for the static keys: prod's pods take the lakehouse's credentials from their
    # identity; and for Kafka's TLS listener, which its ingest reads (test_lockdown.py)
    static_keys = {k for k in base if ".secretKeyRef." in k}
    assert static_keys and not static_keys & prod.keys()
    kafka = {k for k in prod if "kafka" in k.lower()}
    assert {k: v for k, v in prod.items() if k not in sizes | kafka} == {
        k: v for k, v in base.items() if k not in sizes | static_keys
    }
    slots = int(prod["spark.executor.instances"]) * int(prod["spark.executor.cores"])
    base_slots = int(base["spark.executor.instances"]) * int(base["spark.executor.cores"])
    assert slots > base_slots and int(prod["spark.sql.shuffle.partitions"]) >= slots
    with (REPO / "docs" / "bench" / "subscriptions.csv").open() as table:
        rows = {int(r["subscriptions"]): r for r in csv.DictReader(table)}
    peak_gib = float(rows[10_000_000]["remap driver peak MiB"]) / 1024
    assert _gib(prod["spark.driver.memoryOverhead"]) >= peak_gib
