"""``make k8s-demo``: the platform on a one-node Kubernetes cluster built on this machine,
deployed as docs/DEPLOY.md tells a team to (the Spark operator from its chart with
infra/helm/spark-operator-values.yaml, then ``kubectl apply -k`` of an overlay and the
Secrets), and run: posts into Kafka, the ingest and remap DAGs through Airflow's REST API
(each task a pod of the KubernetesExecutor that submits its Spark job to the cluster), and
the matcher's SparkApplication reading the topic on the published version.

The cluster (infra/k8s/local/one_node.py) takes the images podman built (`make image`,
docker/local's stand-ins for MinIO, Kafka and PostgreSQL: infra/k8s/local/services), and
the local overlay (dev's settings at one small node's requests).

    python infra/k8s/local/k8s_demo.py [--posts N] [--keep]      (root; prints each step)
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(REPO), str(HERE)]

from one_node import ClusterError, OneNode, say, wait_until  # noqa: E402

from devtools.local.airflow.demo import timed  # noqa: E402

NAMESPACE = "s3tm-dev"  # the dev overlay's, which the local overlay builds on
PLATFORM_IMAGE = "localhost/s3tm/platform:0.1.0"
OPERATOR_IMAGE = "localhost/s3tm/spark-operator:2.3.0"
# docker/local's stand-ins for the images compose names (docker/local/build.sh)
STAND_INS = {
    "docker.io/minio/minio": "localhost/s3tm-local/s3:moto",
    "docker.io/minio/mc": "localhost/s3tm-local/s3:moto",
    "docker.io/apache/kafka": "localhost/s3tm-local/kafka:maven",
    "docker.io/library/postgres": "localhost/s3tm-local/postgres:15-bookworm",
}
STATSD_IMAGE = "localhost/s3tm-local/statsd-exporter:0.28.0"
SPARK_OPERATOR_CHART = "github.com/kubeflow/spark-operator/v2@v2.3.0"
DAG_TIMEOUT_S = 2400.0
STREAM_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class K8sDemoConfig:
    """Deploy the platform on a one-node Kubernetes cluster built here and run it."""

    out: Path = Path("k8s-demo-output")
    """folder of the cluster's state and logs, and the demo's corpus"""
    posts: int = 15_000
    """posts in the corpus (a third learned from before the stream starts)"""
    matchers: int = 4
    """N (the dev overlay's topic partitions)"""
    subscriptions: int = 500
    """subscriptions registered before the remap"""
    keep: bool = False
    """leave the cluster running (its kubeconfig is in --out)"""


class DemoFailed(RuntimeError):
    """A step failed; the message says which, and where to look."""


def podman(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": str(REPO / "docker/local/containers.conf")}
    return subprocess.run(["podman", *argv], capture_output=True, text=True, env=env, check=False)


def build_operator_image(node: OneNode) -> None:
    """docker/spark-operator/Containerfile on the platform image, with the operator built."""
    done = podman(
        "build",
        "-q",
        "-f",
        str(REPO / "docker/spark-operator/Containerfile"),
        "--build-arg",
        f"PLATFORM_IMAGE={PLATFORM_IMAGE}",
        "-t",
        OPERATOR_IMAGE,
        str(node.bin),
    )
    if done.returncode != 0:
        raise DemoFailed(f"building {OPERATOR_IMAGE}: {done.stderr[-2000:]}")


def kustomization(folder: Path, resources: Path, images: dict[str, str], extra: str = "") -> Path:
    """A kustomization in ``folder`` of ``resources`` with its images retagged."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"resources: [{os.path.relpath(resources, folder)}]", "images:"]
    for name, image in images.items():
        new_name, _, tag = image.rpartition(":")
        lines.append(f"  - {{name: {name}, newName: {new_name}, newTag: '{tag}'}}")
    (folder / "kustomization.yaml").write_text("\n".join(lines) + "\n" + extra)
    return folder


def secret(node: OneNode, namespace: str, name: str, values: dict[str, str]) -> None:
    literals = [f"--from-literal={k}={v}" for k, v in values.items()]
    manifest = node.kubectl(
        "-n",
        namespace,
        "create",
        "secret",
        "generic",
        name,
        *literals,
        "--dry-run=client",
        "-o",
        "yaml",
    ).stdout
    node.kubectl("apply", "-f", "-", input_text=manifest)


def install_services(node: OneNode, out: Path) -> dict[str, str]:
    """MinIO, Kafka, PostgreSQL and the metastore (infra/k8s/local/services) on
    docker/local's images and the platform's; returns the passwords it made."""
    # moto (MinIO's stand-in) takes a host of several labels for a bucket's name unless
    # told it is its own endpoint
    extra = (
        "patches:\n  - target: {kind: Deployment, name: minio}\n    patch: |-\n"
        "      - op: add\n        path: /spec/template/spec/containers/0/env\n"
        "        value: [{name: MOTO_S3_CUSTOM_ENDPOINTS, value: 'http://minio.minio.svc:9000'}]\n"
    )
    # the metastore is the platform image's `s3tm metastore`
    images = {**STAND_INS, "s3tm/platform": PLATFORM_IMAGE}
    folder = kustomization(out / "services", HERE / "services", images, extra)
    node.kubectl("apply", "--server-side", "-k", str(folder))
    values = {"minio": secrets.token_urlsafe(12), "postgres": secrets.token_urlsafe(12)}
    secret(
        node,
        "minio",
        "minio-root",
        {"MINIO_ROOT_USER": "s3tm-root", "MINIO_ROOT_PASSWORD": values["minio"]},
    )
    secret(
        node,
        "postgres",
        "postgres-auth",
        {
            "POSTGRES_USER": "airflow",
            "POSTGRES_DB": "airflow",
            "POSTGRES_PASSWORD": values["postgres"],
        },
    )
    # the metastore checks a table's location in the lakehouse (MinIO's keys, as the platform)
    secret(
        node,
        "metastore",
        "metastore-object-store",
        {"AWS_ACCESS_KEY_ID": "s3tm-root", "AWS_SECRET_ACCESS_KEY": values["minio"]},
    )
    for namespace, deployment in (
        ("minio", "minio"),
        ("kafka-dev", "kafka"),
        ("postgres", "postgres"),
        ("metastore", "metastore"),
    ):
        node.kubectl(
            "-n", namespace, "rollout", "status", f"deployment/{deployment}", "--timeout=300s"
        )
    node.kubectl(
        "-n", "minio", "wait", "--for=condition=complete", "job/lakehouse-bucket", "--timeout=300s"
    )
    return values


def install_operator(node: OneNode) -> None:
    """The Spark operator's chart (from its Go module) with the project's values,
    watching the platform's namespace, as DEPLOY.md installs it."""
    module = subprocess.run(
        ["go", "mod", "download", "-json", SPARK_OPERATOR_CHART],
        capture_output=True,
        text=True,
        check=True,
    )
    chart = Path(json.loads(module.stdout)["Dir"]) / "charts" / "spark-operator-chart"
    node.helm(
        "upgrade",
        "--install",
        "spark-operator",
        str(chart),
        "-n",
        "spark-operator",
        "--create-namespace",
        "-f",
        str(REPO / "infra/helm/spark-operator-values.yaml"),
        "--set",
        f"spark.jobNamespaces={{{NAMESPACE}}}",
        "--wait",
        "--timeout",
        "10m",
    )


def platform_secrets(node: OneNode, passwords: dict[str, str]) -> str:
    """The Secrets DEPLOY.md creates; returns the Airflow admin's password."""
    import base64

    admin = secrets.token_urlsafe(12)
    secret(
        node,
        NAMESPACE,
        "s3tm-object-store",
        {"AWS_ACCESS_KEY_ID": "s3tm-root", "AWS_SECRET_ACCESS_KEY": passwords["minio"]},
    )
    spark = {
        "conn_type": "spark",
        "host": "k8s://https://kubernetes.default.svc:443",
        "extra": {"deploy-mode": "cluster", "namespace": NAMESPACE},
    }
    secret(
        node,
        NAMESPACE,
        "s3tm-airflow-connections",
        {"AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(spark)},
    )
    database = (
        f"postgresql+psycopg2://airflow:{passwords['postgres']}@postgres.postgres.svc:5432/airflow"
    )
    secret(
        node,
        NAMESPACE,
        "s3tm-airflow",
        {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database,
            "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        },
    )
    secret(node, NAMESPACE, "s3tm-airflow-login", {"passwords.json": json.dumps({"admin": admin})})
    # Spark's RPC secret, a file in drivers and executors (never their environment)
    secret(node, NAMESPACE, "s3tm-spark-auth", {"secret": secrets.token_urlsafe(32)})
    return admin


def apply_platform(node: OneNode) -> None:
    """``kubectl apply -k infra/k8s/overlays/local``; the operator's webhook may still be
    getting its certificate when the SparkApplication arrives: tried again until it takes."""
    deadline = time.monotonic() + 300
    while True:
        done = node.kubectl(
            "apply", "--server-side", "-k", str(REPO / "infra/k8s/overlays/local"), check=False
        )
        if done.returncode == 0:
            return
        if "webhook" not in done.stderr or time.monotonic() > deadline:
            raise DemoFailed(f"kubectl apply -k infra/k8s/overlays/local: {done.stderr[-2000:]}")
        time.sleep(5)


def toolbox(node: OneNode, out: Path) -> None:
    """A pod of the platform image with the platform's settings (an operator's one-off
    shell), holding the demo's corpus parts."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "s3tm-toolbox", "namespace": NAMESPACE},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            # admitted under the namespace's Pod Security "restricted", as every pod there
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 50000,
                "runAsGroup": 0,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "toolbox",
                    "image": PLATFORM_IMAGE,
                    "command": ["sleep", "infinity"],
                    "envFrom": [
                        {"configMapRef": {"name": "s3tm-config"}},
                        {"secretRef": {"name": "s3tm-object-store"}},
                    ],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": [
                        {"name": "tmp", "mountPath": "/tmp"},
                        {"name": "state", "mountPath": "/opt/s3tm/state"},
                    ],
                    "resources": {"requests": {"cpu": "50m", "memory": "512Mi"}},
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "state", "emptyDir": {}}],
        },
    }
    node.kubectl("apply", "-f", "-", input_text=json.dumps(manifest))
    node.kubectl(
        "-n", NAMESPACE, "wait", "--for=condition=Ready", "pod/s3tm-toolbox", "--timeout=300s"
    )
    for path in [*sorted(out.glob("posts-*.jsonl")), out / "subscriptions.txt"]:
        node.kubectl("-n", NAMESPACE, "cp", str(path), f"s3tm-toolbox:/tmp/{path.name}")


def in_toolbox(node: OneNode, command: str) -> str:
    done = node.kubectl(
        "-n", NAMESPACE, "exec", "s3tm-toolbox", "--", "sh", "-c", command, check=False
    )
    if done.returncode != 0:
        raise DemoFailed(f"in the toolbox pod, {command}: {done.stderr[-2000:]}")
    return done.stdout


def produce(node: OneNode, part: str) -> None:
    in_toolbox(
        node,
        f's3tm produce --bootstrap "$KAFKA_BOOTSTRAP" --topic "$POSTS_TOPIC" --corpus /tmp/{part}',
    )


def committed(node: OneNode) -> list[dict[str, Any]]:
    """stream.batches' committed micro-batches (none before the table exists)."""
    sql = (
        "SELECT batch_id, routing_version, posts, matches FROM stream.batches "
        "WHERE stage = 'committed' ORDER BY batch_id"
    )
    try:
        text = in_toolbox(node, f's3tm sql --engine duckdb --format json "{sql}"')
    except DemoFailed:
        return []
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def run_dag(api: Any, dag_id: str, conf: dict[str, Any], title: str) -> str:
    """Trigger ``dag_id`` and wait for its run to succeed; returns the run's id."""
    with timed(title):
        run_id = api.trigger(dag_id, conf)
        state = api.wait_for(dag_id, run_id, timeout_s=DAG_TIMEOUT_S)
        if state != "success":
            raise DemoFailed(
                f"{dag_id} run {run_id} ended {state}; failed tasks: "
                f"{api.failed_tasks(dag_id, run_id)}"
            )
    return run_id


def task_log_kept(node: OneNode, api: Any, dag_id: str, run_id: str, task_id: str) -> None:
    """The task's pod is gone (the executor deletes it) and its log is still served, read
    from the lakehouse's bucket: the sources name $S3TM_LAKEHOUSE/airflow-logs."""
    selector = f"dag_id={dag_id},task_id={task_id}"
    wait_until(f"{task_id}'s pod deleted", lambda: not pods_of(node, selector), 300)
    lakehouse = in_toolbox(node, 'printf %s "$S3TM_LAKEHOUSE"').strip()
    where = f"{lakehouse}/airflow-logs/dag_id={dag_id}/run_id={run_id}/task_id={task_id}/"
    text = json.dumps(api.task_log(dag_id, run_id, task_id), default=str)
    if where not in text or "validation passed" not in text:
        raise DemoFailed(f"{task_id}'s log is not read from {where}: {text[:3000]}")
    say(f"    {task_id}'s log, its pod deleted: read from {where}")


def pods_of(node: OneNode, selector: str) -> list[str]:
    done = node.kubectl(
        "-n",
        NAMESPACE,
        "get",
        "pods",
        "-l",
        selector,
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.status.phase}\n{end}",
    )
    return [line for line in done.stdout.splitlines() if line]


def run(config: K8sDemoConfig) -> int:
    from devtools.local.airflow.api import AirflowApi
    from devtools.local.airflow.demo import write_corpus_parts

    if podman("image", "exists", PLATFORM_IMAGE).returncode != 0:
        raise DemoFailed(f"no image {PLATFORM_IMAGE}: run `make image` first")
    out = config.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    say(f"S3-TM on Kubernetes: a one-node cluster in {out} (logs: {out / 'cluster/logs'})")
    node = OneNode(out / "cluster")
    try:
        with timed("start etcd, the control plane, containerd, kubelet and kube-proxy"):
            node.start()
        with timed("images into containerd (platform, operator, stand-ins, pause, CoreDNS)"):
            node.make_static_images()
            build_operator_image(node)
            node.import_images(
                [
                    PLATFORM_IMAGE,
                    OPERATOR_IMAGE,
                    STATSD_IMAGE,
                    *sorted(set(STAND_INS.values())),
                    "localhost/s3tm-local/pause:3.10",
                    "localhost/s3tm-local/coredns:1.12.4",
                ]
            )
        with timed("CoreDNS"):
            node.install_dns()
        with timed("MinIO, Kafka, PostgreSQL and the metastore (infra/k8s/local/services)"):
            passwords = install_services(node, out)
        with timed(f"the Spark operator (helm), watching {NAMESPACE}"):
            node.kubectl("create", "namespace", NAMESPACE)
            install_operator(node)
        with timed("the platform: Secrets, then kubectl apply -k infra/k8s/overlays/local"):
            admin = platform_secrets(node, passwords)
            apply_platform(node)
            for deployment in ("airflow-scheduler", "airflow-api-server", "s3tm-metrics"):
                node.kubectl(
                    "-n",
                    NAMESPACE,
                    "rollout",
                    "status",
                    f"deployment/{deployment}",
                    "--timeout=600s",
                )
            node.kubectl(
                "-n",
                NAMESPACE,
                "wait",
                "--for=condition=complete",
                "job/posts-topic",
                "--timeout=300s",
            )
        learn, live_1, live_2 = write_corpus_parts(out, config.posts, config.subscriptions)
        toolbox(node, out)
        api_ip = node.kubectl(
            "-n",
            NAMESPACE,
            "get",
            "service",
            "airflow-api-server",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ).stdout.strip()
        api = AirflowApi(f"http://{api_ip}:8080", admin, "admin")
        say(
            f"    Airflow's API at http://{api_ip}:8080 (admin; the password is in the Secret "
            f"s3tm-airflow-login)"
        )
        with timed("Airflow parses the DAGs"):
            wait_until(
                "s3tm_ingest and s3tm_remap in Airflow",
                lambda: {"s3tm_ingest", "s3tm_remap"} <= set(api.dag_ids()),
                DAG_TIMEOUT_S,
                poll_s=10,
            )
        with timed(f"produce {learn.name} into Kafka"):
            produce(node, learn.name)
        run_dag(api, "s3tm_ingest", {}, "s3tm_ingest: the topic into bronze and silver.posts")
        with timed(f"register {config.subscriptions} subscriptions"):
            in_toolbox(node, "s3tm subscribe load --subscriber demo /tmp/subscriptions.txt")
        # margin 0: the gate judges by the stream's predicted speed-up, which at the demo's
        # 500 subscriptions is about 1.5% for salb2 over hash (matching is a small share of
        # a batch; docs/RESULTS.md); the demo shows a version deployed, not its gain
        remap = run_dag(
            api,
            "s3tm_remap",
            {"nodes": config.matchers, "algorithm": "salb2", "incremental": False, "margin": 0.0},
            "s3tm_remap: learn, place, validate, evaluate and publish a version",
        )
        with timed("a finished task's log, from the object store"):
            task_log_kept(node, api, "s3tm_remap", remap, "validate")
        with timed("the matcher (SparkApplication) reads the topic on the published version"):
            wait_until(
                "the stream's first committed batch",
                lambda: any(b["posts"] > 0 for b in committed(node)),
                STREAM_TIMEOUT_S,
            )
        for part in (live_1, live_2):
            with timed(f"produce {part.name} into Kafka"):
                produce(node, part.name)
        total = sum(1 for p in (learn, live_1, live_2) for _ in p.open())
        with timed("the matcher reads the topic to its end"):
            wait_until(
                "every post in a committed batch",
                lambda: sum(b["posts"] for b in committed(node)) >= total,
                STREAM_TIMEOUT_S,
            )
        report(node, committed(node), total)
        with timed("a query by table name through the catalog (the metastore)"):
            by_name(node, config)
        with timed("what the platform's accounts did, from the API server's audit log"):
            rights_used(node)
            no_secret_in_environment(node)
        say(f"\nk8s demo: done in {time.perf_counter() - started:.0f}s")
        if config.keep:
            say(f"the cluster keeps running: KUBECONFIG={node.kubeconfig}")
        return 0
    finally:
        if not config.keep:
            with timed("stop the cluster"):
                node.stop()


def by_name(node: OneNode, config: K8sDemoConfig) -> None:
    """Spark SQL on the metastore the jobs registered their tables in finds the version
    the remap published, by name (the tables' folders appear nowhere in the query)."""
    sql = "SELECT routing_version, n_matchers FROM routing.versions WHERE status = 'published'"
    text = in_toolbox(node, f's3tm sql --engine catalog --format json "{sql}"')
    rows = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    if len(rows) != 1 or rows[0]["n_matchers"] != config.matchers:
        raise DemoFailed(f"routing.versions through the catalog: {rows}")
    say(f"    {sql}\n    -> {rows}")


def report(node: OneNode, batches: list[dict[str, Any]], total: int) -> None:
    versions = sorted({b["routing_version"] for b in batches})
    say(
        f"\nstream.batches: {len(batches)} committed micro-batches, "
        f"{sum(b['posts'] for b in batches):,} posts of {total:,} produced, "
        f"{sum(b['matches'] for b in batches):,} matches, routing versions {versions}"
    )
    matcher = pods_of(node, "sparkoperator.k8s.io/app-name=s3tm-matcher")
    say(f"the matcher's pods (driver and executors): {', '.join(matcher)}")
    events = node.kubectl(
        "-n",
        NAMESPACE,
        "get",
        "events",
        "--field-selector",
        "reason=Scheduled",
        "-o",
        "jsonpath={range .items[*]}{.involvedObject.name}\n{end}",
    ).stdout.split()
    drivers = sorted({e for e in events if e.endswith("-driver") and "matcher" not in e})
    say(f"Spark drivers the DAGs' tasks submitted: {len(drivers)} ({', '.join(drivers)})")


def rights_used(node: OneNode) -> None:
    """Each service account of the namespace: the requests it made (verb and resource, from
    the API server's audit log), those refused, and what its Roles grant that it never
    used (a right to trim, or one only a failure path takes)."""
    prefix = f"system:serviceaccount:{NAMESPACE}:"
    used: dict[str, set[str]] = {}
    refused: dict[str, set[str]] = {}
    for line in node.audit_log.read_text().splitlines():
        event = json.loads(line)
        user, ref = event["user"]["username"], event.get("objectRef") or {}
        if not user.startswith(prefix) or ref.get("namespace") != NAMESPACE:
            continue
        resource = ref.get("resource", "?") + (
            f"/{ref['subresource']}" if "subresource" in ref else ""
        )
        code = (event.get("responseStatus") or {}).get("code", 200)
        bucket = refused if code in (401, 403) else used
        bucket.setdefault(user[len(prefix) :], set()).add(f"{event['verb']} {resource}")
    roles = json.loads(
        node.kubectl("-n", NAMESPACE, "get", "roles,rolebindings", "-o", "json").stdout
    )
    granted: dict[str, set[str]] = {}
    rules = {r["metadata"]["name"]: r["rules"] for r in roles["items"] if r["kind"] == "Role"}
    for binding in (b for b in roles["items"] if b["kind"] == "RoleBinding"):
        for subject in binding.get("subjects", []):
            if subject.get("namespace", NAMESPACE) != NAMESPACE:
                continue
            for rule in rules.get(binding["roleRef"]["name"], []):
                granted.setdefault(subject["name"], set()).update(
                    f"{v} {r}" for r in rule["resources"] for v in rule["verbs"]
                )
    for account in sorted(set(used) | set(granted)):
        say(f"    {account}: used {', '.join(sorted(used.get(account, ()))) or 'nothing'}")
        if refused.get(account):
            say(f"      refused: {', '.join(sorted(refused[account]))}")
        # a watch is asked as get/list/watch; a server-side apply arrives as patch
        idle = {g for g in granted.get(account, ()) if g not in used.get(account, set())}
        if idle:
            say(f"      granted, not used in this run: {', '.join(sorted(idle))}")


def no_secret_in_environment(node: OneNode) -> None:
    """No pod of the namespace carries Spark's authentication secret in its spec (Spark's
    generated one would be an executor's environment variable, readable with `get pods`)."""
    pods = json.loads(node.kubectl("-n", NAMESPACE, "get", "pods", "-o", "json").stdout)
    carrying = sorted(
        pod["metadata"]["name"]
        for pod in pods["items"]
        for container in pod["spec"]["containers"]
        for env in container.get("env", [])
        if env["name"] == "SPARK_AUTHENTICATE_SECRET"
    )
    if carrying:
        raise DemoFailed(f"Spark's secret is in the environment of {carrying}")
    say(f"    no pod of {len(pods['items'])} carries Spark's secret in its environment")


def main(argv: list[str] | None = None) -> int:
    import tyro

    from devtools.local.airflow.demo import run_until_done

    config = tyro.cli(K8sDemoConfig, args=argv, prog="infra/k8s/local/k8s_demo.py")
    return run_until_done(
        "k8s demo",
        lambda: run(config),
        (DemoFailed, ClusterError),
        cleaned_up="the cluster is stopped",
    )


if __name__ == "__main__":
    sys.exit(main())
