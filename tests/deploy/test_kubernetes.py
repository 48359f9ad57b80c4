"""infra/ validated offline: the kustomize overlays rendered (``kubectl kustomize``, when
kubectl is on the machine) and every resource checked against Kubernetes' own OpenAPI
schemas (kubernetes-validate, from PyPI); the Spark operator's SparkApplication, whose
CRD schema is not packaged, is checked for what the matcher relies on."""

from __future__ import annotations

import contextlib
import copy
import importlib
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.deploy.kustomized import conf_settings, rendered, spark_defaults, task_pod

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
    # but for the runbook's page, the overlay's S3TM_RUNBOOK (its anchor the file's)
    assert _anchors_only(rule["spec"]["groups"]) == _anchors_only(rules["groups"])


def _anchors_only(groups: list[dict]) -> list[dict]:
    groups = copy.deepcopy(groups)
    for group in groups:
        for rule in group["rules"]:
            if "runbook_url" in rule.get("annotations", {}):
                _page, anchor = rule["annotations"]["runbook_url"].split("#", 1)
                rule["annotations"]["runbook_url"] = "#" + anchor
    return groups


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
    command = container["args"]  # the image's entrypoint runs it
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
    # no S3A committer named, as the image's own settings name none (Delta's commit
    # protocol writes s3a:// without Hadoop's output committers)
    image = (REPO / "docker" / "spark-defaults.conf").read_text()
    assert "fs.s3a.committer" not in defaults and "fs.s3a.committer" not in str(app)
    assert "fs.s3a.committer.name" not in conf_settings(image)


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


def _airflow(documents: list[dict]) -> dict[str, dict]:
    """Airflow's Deployments by component, and the task pods' template as "worker"."""
    found = {
        d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]: d
        for d in documents
        if d["kind"] == "Deployment"
        and d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/name") == "airflow"
    }
    found["worker"] = {"spec": {"template": task_pod(documents)}}
    return found


def _environment(container: dict, documents: list[dict]) -> dict[str, str]:
    """A container's settings from its ConfigMaps (envFrom) and its own env values."""
    maps = {d["metadata"]["name"]: d.get("data", {}) for d in documents if d["kind"] == "ConfigMap"}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(maps[source["configMapRef"]["name"]])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


def test_airflow_runs_compose_s_processes_with_compose_s_settings() -> None:
    """The four processes compose runs, each from the platform image as its user, after the
    database migration (the scheduler runs it, the others wait for it), with compose's
    Airflow settings but for the executor (KubernetesExecutor) and what names compose's
    services; the task pods' template is a valid Pod whose container is the executor's
    `base`, under `s3tm-task`, with no access to Airflow's database."""
    documents = rendered(K8S / "overlays" / "prod")
    airflow = _airflow(documents)
    assert airflow.keys() == {"api-server", "scheduler", "dag-processor", "triggerer", "worker"}
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    services = {
        name.removeprefix("airflow-").replace("apiserver", "api-server"): service
        for name, service in compose["services"].items()
        if name.startswith("airflow-") and name != "airflow-init"
    }
    assert services.keys() == airflow.keys() - {"worker"}
    for component, service in services.items():
        pod = airflow[component]["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        # as args: the image's entrypoint (tini, the task pods' image) runs first
        assert container["args"] == service["command"]
        # compose's health check is the liveness probe
        check = service["healthcheck"]["test"]
        probe = container["livenessProbe"]
        if "exec" in probe:
            assert ["CMD", *probe["exec"]["command"]] == check
        else:
            assert probe["httpGet"]["path"] in check[-1]
        assert (
            pod["securityContext"]["runAsUser"] == 50000 and pod["securityContext"]["runAsNonRoot"]
        )
        init = pod["initContainers"][0]
        # the scheduler migrates; the others wait for it (prod's API server then makes the
        # admin: the next test)
        command = " ".join(init["args"])
        migrate = component == "scheduler"
        assert ("airflow db migrate" in command) == migrate, command
        assert ("airflow db check-migrations" in command) != migrate, command
        env = _environment(container, documents)
        # compose's passwords file is the one Airflow writes in its state volume; here the
        # Secret's (test below)
        for key, value in compose["x-airflow-env"].items():
            if key.startswith("AIRFLOW__") and "${" not in str(value) and "PASSWORDS" not in key:
                expected = {"LocalExecutor": "KubernetesExecutor"}.get(value, value)
                assert (
                    env.get(key, "")
                    .replace("airflow-api-server", "airflow-apiserver")
                    .replace("airflow-statsd", "statsd-exporter")
                    == expected
                ), key
        secrets = {s["secretRef"]["name"] for s in container["envFrom"] if "secretRef" in s}
        assert {"s3tm-airflow", "s3tm-airflow-connections"} <= secrets
    worker = airflow["worker"]["spec"]["template"]
    kubernetes_validate.validate(worker, KUBERNETES_VERSION, strict=True)
    (base,) = worker["spec"]["containers"]
    assert base["name"] == "base" and "image" not in base  # the executor's, from S3TM_IMAGE
    assert worker["spec"]["serviceAccountName"] == "s3tm-task"
    assert "s3tm-airflow" not in {
        s["secretRef"]["name"] for s in base["envFrom"] if "secretRef" in s
    }
    env = _environment(base, documents)
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith("http://airflow-api-server:")
    scheduler = airflow["scheduler"]["spec"]["template"]["spec"]
    template_file = env["AIRFLOW__KUBERNETES_EXECUTOR__POD_TEMPLATE_FILE"]
    mounts = scheduler["containers"][0]["volumeMounts"]
    mount = next(m for m in mounts if template_file.startswith(m["mountPath"] + "/"))
    volume = next(v for v in scheduler["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == "airflow-pod-template"


def test_airflow_on_kubernetes_has_the_login_compose_has():
    """dev's Airflow defines the admin user as compose does (simple auth manager), its
    password from a Secret mounted on the API server where the passwords file is read, and
    DEPLOY.md creates that Secret."""
    documents = rendered(K8S / "overlays" / "dev")
    api = _airflow(documents)["api-server"]["spec"]["template"]["spec"]
    env = _environment(api["containers"][0], documents)
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())["x-airflow-env"]
    role = compose["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(":")[-1]
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == f"admin:{role}"
    passwords = env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    mount = next(
        m
        for m in api["containers"][0]["volumeMounts"]
        if passwords.startswith(m["mountPath"] + "/")
    )
    volume = next(v for v in api["volumes"] if v["name"] == mount["name"])
    # the file must be writable (the manager opens it read-write): a folder of the pod's
    # own, into which an init container copies the Secret's file
    assert "emptyDir" in volume
    (copy,) = [c for c in api["initContainers"]
               if any(m["name"] == mount["name"] for m in c.get("volumeMounts", []))]  # fmt: skip
    assert copy["args"][0] == "cp" and copy["args"][-1].rstrip("/") == mount["mountPath"]
    source = next(m for m in copy["volumeMounts"] if copy["args"][1].startswith(m["mountPath"]))
    secret = next(v for v in api["volumes"] if v["name"] == source["name"])["secret"]["secretName"]
    runbook = (REPO / "docs" / "DEPLOY.md").read_text()
    assert f"create secret generic {secret}" in runbook and "passwords.json" in runbook
    module, _, name = env["AIRFLOW__CORE__AUTH_MANAGER"].rpartition(".")
    manager = getattr(importlib.import_module(module), name)
    assert manager.__name__ == "SimpleAuthManager"


def test_production_logs_in_through_fab_with_the_same_secrets_admin():
    """prod: FAB's auth manager (the simple one is for development), from the provider the
    image installs (pinned once, in the extra the Dockerfile installs); the admin made by
    the API server's init container from the same Secret, mounted where the passwords
    file setting points (the image test runs that script and logs in)."""
    documents = rendered(K8S / "overlays" / "prod")
    api = _airflow(documents)["api-server"]["spec"]["template"]["spec"]
    env = _environment(api["containers"][0], documents)
    assert env["AIRFLOW__CORE__AUTH_MANAGER"].startswith("airflow.providers.fab.auth_manager.")
    init = api["initContainers"][0]
    assert "airflow users create --username admin --role Admin" in init["args"][-1]
    assert "db check-migrations" in init["args"][-1]  # after the scheduler's migration
    passwords = env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    (mount,) = [m for m in init["volumeMounts"] if passwords.startswith(m["mountPath"] + "/")]
    volume = next(v for v in api["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "s3tm-airflow-login"
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    installed = re.search(r"--extra (\w+)", (REPO / "docker" / "Dockerfile").read_text())
    assert installed, "the Dockerfile installs the project with one extra"
    pins = extras["optional-dependencies"][installed.group(1)]
    assert any(p.startswith("apache-airflow-providers-fab>=") for p in pins), pins


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
    page = "https://docs.team.example/s3tm/OPERATIONS.md"
    shutil.copytree(K8S, tmp_path / "k8s")
    prod = tmp_path / "k8s" / "overlays" / "prod" / "kustomization.yaml"
    text = prod.read_text()
    literal = re.search(r"      - S3TM_RUNBOOK=(\S+)\n", text)
    assert literal and literal.group(1).startswith("https://"), "prod's runbook is a URL"
    prod.write_text(text.replace(literal.group(0), f"      - S3TM_RUNBOOK={page}\n"))
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
    """Every Secret a manifest names: ``secretName`` values, ``secretRef``/``secretKeyRef``
    names (a pod template kept as a string in a ConfigMap parsed)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("secretRef", "secretKeyRef") and isinstance(value, dict):
                found.add(value["name"])
            elif key == "secretName" and isinstance(value, str):
                found.add(value)
            else:
                found |= _spark_secrets(str(key)) | _secrets_named(value)
    elif isinstance(node, list):
        for item in node:
            found |= _secrets_named(item)
    elif isinstance(node, str):
        found |= _spark_secrets(node)
        if "secretRef" in node:
            # a file in a ConfigMap (a pod template); an admission rule's CEL is not YAML
            with contextlib.suppress(yaml.YAMLError):
                found |= _secrets_named(yaml.safe_load(node))
    return found


def _spark_secrets(text: str) -> set[str]:
    """The Secrets a Spark setting mounts or reads (spark-defaults.conf, sparkConf)."""
    mounted = re.findall(r"spark\.kubernetes\.\w+\.secrets\.([\w.-]+)", text)
    as_env = re.findall(r"spark\.kubernetes\.\w+\.secretKeyRef\.\w+\s+([\w.-]+):", text)
    return set(mounted) | set(as_env)


def test_deploy_creates_every_secret_the_overlays_name_before_it_applies_them() -> None:
    """DEPLOY.md's Kubernetes commands create the namespace, then each Secret the overlays
    name (and the pull secret prod's accounts name), then `kubectl apply`: a pod reads its
    Secrets and pull secret when it is created."""
    needed: set[str] = set()
    for overlay in OVERLAYS:
        documents = rendered(K8S / "overlays" / overlay)
        needed |= _secrets_named(documents)
        needed |= {
            p["name"] for d in documents if d["kind"] == "ServiceAccount"
            for p in d.get("imagePullSecrets", [])
        }  # fmt: skip
    assert {"s3tm-airflow", "s3tm-object-store", "s3tm-airflow-login", "s3tm-spark-auth",
            "s3tm-registry"} <= needed  # fmt: skip
    docs = (REPO / "docs" / "DEPLOY.md").read_text()
    section = docs[docs.index("## 3. Kubernetes") :]
    lines = section[: section.index("\n## ")].splitlines()
    apply = next(i for i, line in enumerate(lines) if line.startswith("kubectl apply -k"))
    namespace = next(i for i, line in enumerate(lines) if "create namespace" in line)
    created = {
        m.group(1): i
        for i, line in enumerate(lines)
        if (m := re.search(r"create secret (?:generic|docker-registry) (\S+)", line))
    }
    assert needed <= created.keys(), needed - created.keys()
    assert all(namespace < created[name] < apply for name in needed), (apply, created)


def test_the_airflow_secret_holds_the_settings_compose_gives_from_its_env_file() -> None:
    """The Secret s3tm-airflow is read as environment: DEPLOY.md creates it with the
    settings compose takes from docker/.env (the database, the Fernet, API and JWT keys)."""
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())["x-airflow-env"]
    secret_settings = {
        k for k, v in compose.items() if k.startswith("AIRFLOW__") and ":?" in str(v)
    }
    docs = (REPO / "docs" / "DEPLOY.md").read_text()
    start = docs.index("create secret generic s3tm-airflow ")
    command = docs[start : docs.index("\n\n", start)]
    end = re.search(r"\n(?!\s*--)", command + "\n")
    assert end is not None  # the text + "\n" has a line end
    command = command[: end.start()]
    given = set(re.findall(r"--from-literal=(\w+)=", command))
    assert given == secret_settings, (given, secret_settings)


def test_task_pods_submit_spark_jobs_with_no_more_than_a_submission_needs() -> None:
    """Airflow's task pods run as their own service account, not the drivers' `spark`: its
    Role creates, watches and deletes driver pods and applies their Service, ConfigMap and
    NetworkPolicy, nothing else; the drivers keep theirs (executors)."""
    documents = rendered(K8S / "overlays" / "prod")
    account = {
        "name": _airflow(documents)["worker"]["spec"]["template"]["spec"]["serviceAccountName"]
    }
    assert account["name"] != "spark"
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
    # Spark 4's spark-submit applies the driver's Service, ConfigMap and NetworkPolicy
    # server-side (a PATCH); the Spark operator's controller submits with the same Role
    assert granted == {
        *{("pods", v) for v in ("create", "get", "list", "watch", "delete")},
        *{(r, v) for r in ("services", "configmaps", "networkpolicies")
          for v in ("create", "get", "patch")},
    }  # fmt: skip
    assert {"kind": "ServiceAccount", "name": "spark-operator-controller",
            "namespace": "spark-operator"} in binding["subjects"]  # fmt: skip
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


def test_every_airflow_setting_the_deployment_names_is_one_airflow_knows() -> None:
    """A misspelt ``AIRFLOW__SECTION__KEY`` is ignored by Airflow without a word: each one
    the manifests, DEPLOY.md's Secret and the entrypoint name is an option of Airflow's
    configuration (its sections, the KubernetesExecutor's included)."""
    from airflow.configuration import conf

    known = {
        f"AIRFLOW__{section.upper()}__{option.upper()}"
        for section, description in conf.configuration_description.items()
        for option in description["options"]
    }
    text = "\n".join(
        [
            *(yaml.safe_dump(d) for o in OVERLAYS for d in rendered(K8S / "overlays" / o)),
            (REPO / "docs" / "DEPLOY.md").read_text(),
            (REPO / "docker" / "entrypoint.sh").read_text(),
        ]
    )
    named = set(re.findall(r"AIRFLOW__[A-Z_]+__[A-Z_]+[A-Z]", text))
    assert len(named) >= 15, named
    assert named <= known, sorted(named - known)


SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|CREDENTIAL|_KEY(_ID)?$|FERNET", re.IGNORECASE)


def _literal_secrets(node: object, where: str = "") -> list[str]:
    """Each environment variable with a secret's name given a literal value, and each Spark
    setting of a secret given one (a file path is not a secret): what `get pods` or `get
    configmaps` would show to any account allowed to read them."""
    found: list[str] = []
    if isinstance(node, dict):
        name, value = node.get("name"), node.get("value")
        if isinstance(name, str) and isinstance(value, str) and SECRET_NAME.search(name):
            found.append(f"{where}: env {name}")
        for key, item in node.items():
            reference = re.search(r"\.secretKeyRef\.|\.secrets\.", str(key))  # a Secret's name
            if (
                isinstance(key, str) and key.startswith("spark.") and isinstance(item, str)
                and re.search(r"secret|password|token|access\.key", key) and not reference
                and not item.startswith("/")
            ):  # fmt: skip
                found.append(f"{where}: {key}")
            found += _literal_secrets(item, where)
    elif isinstance(node, list):
        for item in node:
            found += _literal_secrets(item, where)
    elif isinstance(node, str) and node.lstrip().startswith(("apiVersion", "spark.", "#")):
        with contextlib.suppress(yaml.YAMLError):
            parsed = yaml.safe_load(node)
            found += _literal_secrets(parsed if isinstance(parsed, dict) else {}, where)
        found += _literal_secrets(conf_settings(node), where)
    return found


def test_no_secret_is_a_literal_in_any_rendered_pod_or_setting() -> None:
    """Secrets reach pods by reference (secretRef, secretKeyRef, a mounted Secret's file),
    never as a value in a pod spec, a pod template or Spark's settings: a test that fails
    on one shows this scan would see it."""
    for overlay in ["base", *(f"overlays/{o}" for o in (*OVERLAYS, "local"))]:
        documents = rendered(K8S / overlay)
        found = [f for d in documents for f in _literal_secrets(d, d["metadata"]["name"])]
        assert not found, (overlay, found)
    planted = copy.deepcopy(rendered(K8S / "base"))
    matcher = next(d for d in planted if d["kind"] == "SparkApplication")
    matcher["spec"]["driver"]["env"].append({"name": "KAFKA_SASL_PASSWORD", "value": "x"})
    matcher["spec"]["sparkConf"]["spark.authenticate.secret"] = "hunter2"
    found = [f for d in planted for f in _literal_secrets(d, d["metadata"]["name"])]
    assert sorted(found) == [
        "s3tm-matcher: env KAFKA_SASL_PASSWORD",
        "s3tm-matcher: spark.authenticate.secret",
    ], found


def test_an_image_by_digest_reaches_every_platform_pod_and_the_task_pods(tmp_path) -> None:
    """An immutable reference: `images:` with a digest rewrites every platform pod's image,
    the matcher's and S3TM_IMAGE (the task pods' and their Spark pods': the entrypoint gives
    a digest to the task pod template, tests/deploy/test_entrypoint.py) to
    REPOSITORY@sha256:..., and nothing keeps the mutable tag."""
    digest = "sha256:" + "ab" * 32
    shutil.copytree(K8S, tmp_path / "k8s")
    pinned = tmp_path / "k8s" / "overlays" / "pinned"
    pinned.mkdir()
    (pinned / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ../prod\nimages:\n  - name: s3tm/platform\n"
        f"    newName: registry.example/s3tm/platform\n    digest: {digest}\n"
    )
    documents = rendered(pinned)
    reference = f"registry.example/s3tm/platform@{digest}"
    images = [
        c["image"] for d in documents if d["kind"] in ("Deployment", "Job")
        for c in d["spec"]["template"]["spec"].get("initContainers", [])
        + d["spec"]["template"]["spec"]["containers"]
        if "s3tm" in c["image"]
    ]  # fmt: skip
    assert images and set(images) == {reference}, set(images)
    app = next(d for d in documents if d["kind"] == "SparkApplication")
    assert app["spec"]["image"] == reference
    config = next(d for d in documents if d["metadata"]["name"] == "s3tm-airflow-config")
    assert config["data"]["S3TM_IMAGE"] == reference
    assert "s3tm/platform:" not in yaml.safe_dump_all(documents)
