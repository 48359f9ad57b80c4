"""docker/ validated offline (no Docker daemon here): the Dockerfile linted by hadolint,
compose.yaml against the Compose Specification's JSON schema (check-jsonschema's vendored
copy), and what a schema cannot see: every setting comes from .env, secrets are required
and never written down, long-running services have health checks, dependencies exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
BIN = Path(sys.executable).parent
SECRET = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|ACCESS_KEY", re.I)


def _compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def _env_example() -> dict[str, str]:
    pairs = {}
    for line in (DOCKER / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


def test_dockerfile_passes_hadolint():
    done = subprocess.run(
        [str(BIN / "hadolint"), str(DOCKER / "Dockerfile")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_compose_file_matches_the_compose_specification():
    done = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec",
         str(DOCKER / "compose.yaml")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_setting_comes_from_env_and_secrets_are_required_not_written():
    text = (DOCKER / "compose.yaml").read_text()
    example = _env_example()
    variables = re.findall(r"(?<!\$)\$\{(\w+)(:?[-?])?([^}]*)\}", text)
    assert variables
    for name, operator, _ in variables:
        assert name in example, f"${{{name}}} is not documented in docker/.env.example"
        if SECRET.search(name) or name == "MINIO_ROOT_USER":
            assert operator == ":?", f"secret {name} must be required (${{{name}:?...}})"
            assert example[name] == "", f"docker/.env.example must not hold a value for {name}"
    # no literal secret anywhere: every secret-looking key's value is an interpolation
    for key, value in _items(_compose()):
        secret_key = isinstance(key, str) and SECRET.search(key) and not key.endswith("_FILE")
        if secret_key and isinstance(value, str):
            assert "${" in value or "$$" in value, (key, value)
    assert "docker/.env" in (REPO / ".gitignore").read_text().split()


def test_services_are_healthy_wired_and_their_volumes_declared():
    compose = _compose()
    services = compose["services"]
    expected = {
        "spark-master", "spark-worker-1", "spark-worker-2", "postgres", "minio", "kafka",
        "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
        "airflow-triggerer", "matcher", "producer", "metrics", "prometheus", "grafana",
    }  # fmt: skip
    assert expected <= set(services)
    one_shot = {n for n, s in services.items() if n.endswith("-init")}
    for name, service in services.items():
        if name not in one_shot and name != "producer":
            assert "healthcheck" in service, f"{name} has no health check"
        for needed, condition in (service.get("depends_on") or {}).items():
            assert needed in services, (name, needed)
            wanted = condition["condition"]
            assert wanted == (
                "service_completed_successfully" if needed in one_shot else "service_healthy"
            ), (name, needed, wanted)
        for mount in service.get("volumes", []):
            source = mount.split(":", 1)[0]
            if source.startswith("."):  # the project's own config files, read-only
                assert (DOCKER / source).exists() and mount.endswith(":ro"), (name, mount)
            else:
                assert source in compose["volumes"], (name, source)
    assert set(compose["volumes"]) >= {"postgres-data", "minio-data", "kafka-data"}
    # the DAGs submit to the standalone master, the lakehouse is on MinIO
    airflow = services["airflow-scheduler"]["environment"]
    assert "spark://spark-master:7077" in airflow["AIRFLOW_CONN_SPARK_DEFAULT"]
    assert airflow["S3TM_LAKEHOUSE"].startswith("s3://")
    assert "--source" in services["matcher"]["command"]
    # the broker keeps its data on its volume
    kafka = services["kafka"]
    assert f"kafka-data:{kafka['environment']['KAFKA_LOG_DIRS']}" in kafka["volumes"]
    # monitoring: Prometheus and Grafana reach the host on loopback only; the exporter not at
    # all (Prometheus scrapes it on the compose network)
    for name in ("prometheus", "grafana"):
        assert all(p.startswith("127.0.0.1:") for p in services[name]["ports"]), name
    assert "ports" not in services["metrics"]
    scraped = yaml.safe_load((REPO / "infra" / "monitoring" / "prometheus-compose.yml").read_text())
    targets = {
        t for job in scraped["scrape_configs"] for c in job["static_configs"] for t in c["targets"]
    }
    assert "metrics:9108" in targets and "9108" in services["metrics"]["command"]
    for target in targets:
        assert target.split(":")[0] in services, target


def test_the_image_context_holds_what_the_dockerfile_copies():
    text = (DOCKER / "Dockerfile").read_text()
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    for source in re.findall(r"^COPY (?!--from)(?:--\S+ )*(\S+) ", text, flags=re.M):
        assert (REPO / source).exists(), source
        assert any(rule.lstrip("!").rstrip("/*") == source for rule in ignore), source


def _items(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _items(value)
    elif isinstance(node, list):
        for item in node:
            yield from _items(item)


def test_published_ports_are_on_loopback_only():
    """The Spark master's UI, the S3 console, Airflow's UI, Prometheus and Grafana: on the
    host's 127.0.0.1 (a reverse proxy with TLS exposes what a team wants to)."""
    for name, service in _compose()["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)


def test_the_platform_uses_a_lakehouse_user_not_the_s3_servers_root():
    compose = _compose()
    env = compose["x-object-store-env"]
    assert "LAKEHOUSE_ACCESS_KEY" in env["AWS_ACCESS_KEY_ID"], env["AWS_ACCESS_KEY_ID"]
    assert "LAKEHOUSE_SECRET_KEY" in env["AWS_SECRET_ACCESS_KEY"]
    root = [k for k, v in _items(compose["services"]) if isinstance(v, str) and "MINIO_ROOT" in v]
    assert set(root) <= {"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"}, root  # the server's own
    for name, service in compose["services"].items():
        if name not in ("minio", "minio-init"):
            assert "MINIO_ROOT" not in str(service), name
    init = " ".join(compose["services"]["minio-init"]["command"])
    for step in ("mc admin user add", "mc admin policy create", "mc admin policy attach"):
        assert step in init, step
    assert "arn:aws:s3:::%s/*" in init  # the policy: the lakehouse bucket, nothing else


def test_the_matcher_is_restarted_without_a_limit_that_never_resets():
    """`on-failure:N` counts every restart of the container's life: a matcher that failed N
    times over weeks stays down. `unless-stopped` restarts with a delay that resets once it
    runs."""
    assert _compose()["services"]["matcher"]["restart"] == "unless-stopped"


def test_an_application_gets_a_core_cap_so_the_matcher_leaves_cores_to_the_jobs():
    master = _compose()["services"]["spark-master"]["environment"]
    assert "-Dspark.deploy.defaultCores=${SPARK_APP_CORES" in master["SPARK_MASTER_OPTS"]
    example = _env_example()
    assert int(example["SPARK_APP_CORES"]) < 2 * int(example["SPARK_WORKER_CORES"])


def test_airflow_components_share_one_api_secret_key():
    services = _compose()["services"]
    keys = {
        name: service["environment"].get("AIRFLOW__API__SECRET_KEY")
        for name, service in services.items()
        if name.startswith("airflow-")
    }
    assert len(keys) == 5 and len(set(keys.values())) == 1 and None not in keys.values(), keys


def test_the_matcher_serves_the_ui_its_scrape_target_needs():
    matcher = _compose()["services"]["matcher"]
    assert matcher["environment"]["S3TM_SPARK_UI"] == "true"
    scraped = (REPO / "infra" / "monitoring" / "prometheus-compose.yml").read_text()
    assert "matcher:4040" in scraped


def test_no_s3a_committer_is_named_without_its_commit_protocol():
    settings = dict(
        line.split(None, 1)
        for line in (DOCKER / "spark-defaults.conf").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    if "spark.hadoop.fs.s3a.committer.name" in settings:
        assert "PathOutputCommitProtocol" in settings.get(
            "spark.sql.sources.commitProtocolClass", ""
        )


def test_every_third_party_image_is_a_variable_with_the_public_image_as_default():
    for name, service in _compose()["services"].items():
        image = service["image"]
        if name in ("minio-init", "kafka-init") or "S3TM_IMAGE" in image:
            continue
        found = re.fullmatch(r"\$\{([A-Z_]+_IMAGE):-([\w./-]+:[\w.-]+)\}", image)
        assert found, (name, image)
        assert found.group(1) in _env_example(), found.group(1)
