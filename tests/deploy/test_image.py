"""The platform image (``make image``), run as a user runs it: its CLI, Airflow with the
project's DAGs, a Spark job through spark-submit in local mode and through the entrypoint's
Kubernetes ``driver`` mode, as the non-root user the manifests name, writing nowhere but
its state, log and temporary folders, with numba's kernels loaded from the image's cache.

Each test starts containers of the image with podman (Docker where podman is absent):
the ``platform_image`` fixture marks them ``container`` (``make test-containers``)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.deploy.kustomized import rendered, task_pod

REPO = Path(__file__).resolve().parents[2]
JOBS = "/opt/s3tm/venv/lib/python3.11/site-packages/spark_jobs/jobs"
# where the image's user may write: state, logs, scratch (what `podman diff` may list)
WRITABLE = ("/opt/s3tm/state", "/opt/s3tm/logs", "/tmp")
# what the engine itself writes into every container (name resolution, its marker file)
ENGINE_FILES = {
    "/etc",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/run",
    "/run/.containerenv",
}


def _run(engine: list[str], *argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*engine, *argv], capture_output=True, text=True, timeout=timeout, check=False
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (
        f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def test_the_cli_answers_as_the_user_the_manifests_name(platform_image, container_engine):
    out = _ok(_run(container_engine, "run", "--rm", platform_image))
    assert "usage: s3tm" in out and "stream" in out
    uid = _ok(_run(container_engine, "run", "--rm", platform_image, "id", "-u")).strip()
    assert uid != "0"
    # every pod of the platform image that names a user runs as the image's (Airflow's, its
    # task pods': the template names no image, the executor gives it the platform's)
    documents = rendered(REPO / "infra" / "k8s" / "base")
    pods = [d.get("spec", {}).get("template", {}).get("spec", {}) for d in documents]
    users = set()
    for pod in [*pods, task_pod(documents)["spec"]]:
        images = {c.get("image", "s3tm/platform") for c in pod.get("containers", [])}
        if any(i.startswith("s3tm/platform") for i in images) and "securityContext" in pod:
            users.add(str(pod["securityContext"]["runAsUser"]))
    assert users == {uid}, users


def test_the_airflow_charts_probe_and_log_groomer_paths_run(platform_image, container_engine):
    """The chart's probes run `/entrypoint python ...` and its log groomers `bash
    /clean-logs`, the official Airflow image's paths: both exist and work in this one."""
    probe = _run(container_engine, "run", "--rm", platform_image, "/entrypoint", "python", "-c",
                 "import airflow; print('probe ok')")  # fmt: skip
    assert "probe ok" in _ok(probe)
    # the groomer cleans where the image's Airflow writes its logs (its
    # AIRFLOW__LOGGING__BASE_LOG_FOLDER), not a folder under Airflow's home
    script = (
        'logs="$AIRFLOW__LOGGING__BASE_LOG_FOLDER" && mkdir -p "$logs/old" && '
        'touch -d \'20 days ago\' "$logs/old/a.log" && touch "$logs/new.log" && '
        '(timeout 5 bash /clean-logs >/dev/null || true) && find "$logs" | sort'
    )
    left = _ok(_run(container_engine, "run", "--rm", platform_image, "sh", "-c", script))
    logs = "/opt/s3tm/logs/airflow"  # the image's (docker/Dockerfile)
    assert left.split() == [logs, f"{logs}/new.log"]


def test_airflow_lists_the_four_dags_with_no_import_error(platform_image, container_engine):
    script = (
        "airflow db migrate >/dev/null 2>&1 && airflow dags reserialize >/dev/null 2>&1 && "
        "airflow dags list --output json 2>/dev/null && echo '---' && "
        "airflow dags list-import-errors --output json 2>/dev/null"
    )
    out = _ok(_run(container_engine, "run", "--rm", platform_image, "sh", "-c", script))
    dags_part, _, errors_part = out.partition("---")
    dags = {d["dag_id"] for d in _json_list(dags_part)}
    # the project's four, and no example DAG (the image's own default, whatever compose sets)
    assert dags == {"s3tm_ingest", "s3tm_remap", "s3tm_monitor", "s3tm_maintenance"}
    assert _json_list(errors_part) == []


def _json_list(printed: str) -> list[dict[str, object]]:
    """The JSON list a command printed among its log lines ("No data found" is none)."""
    lines = [line for line in printed.splitlines() if line.startswith("[") and line.endswith("]")]
    return json.loads(lines[-1]) if lines else []


def test_a_spark_job_writes_only_state_logs_and_scratch(platform_image, container_engine):
    """`s3tm demo-corpus`, then the ingest job by spark-submit in local mode and by the
    entrypoint's `driver` mode (what a Kubernetes driver pod runs), then the rows read back
    with delta-rs; `podman diff` lists what the container changed in the image."""
    lake, corpus = "/opt/s3tm/state/lakehouse", "/opt/s3tm/state/landing"
    job = f"{JOBS}/ingest.py --lakehouse {lake} --landing {corpus}"
    submit = f"--master local[1] --driver-memory 1g {job}"
    script = (
        f"set -e; s3tm demo-corpus --posts 2000 --out {corpus}/demo.jsonl.gz; "
        f"spark-submit {submit} --batch-id 1; "
        f"/opt/s3tm/bin/entrypoint.sh driver {submit} --batch-id 2; "
        f"s3tm sql --lakehouse {lake} --format json "
        "'SELECT count(*) AS n, count(DISTINCT post_id) AS posts FROM bronze.posts'"
    )
    name = "s3tm-image-test-job"
    _run(container_engine, "rm", "-f", name)
    try:
        bind = "SPARK_DRIVER_BIND_ADDRESS=127.0.0.1"  # what Spark gives a driver pod
        done = _run(container_engine, "run", "--name", name, "-e", bind, platform_image,
                    "sh", "-c", script)  # fmt: skip
        out = _ok(done)
        counts = json.loads(out.strip().splitlines()[-1])
        assert counts["posts"] == 2000, counts  # both batches: the same posts, deduplicated
        changed = _ok(_run(container_engine, "diff", name)).split("\n")
    finally:
        _run(container_engine, "rm", "-f", name)
    written = [line.split(" ", 1)[1] for line in changed if line.startswith(("A ", "C "))]
    outside = [
        path for path in written
        if not path.startswith(WRITABLE) and not any(w.startswith(path + "/") for w in WRITABLE)
        and path not in ("/opt", "/opt/s3tm") and path not in ENGINE_FILES
    ]  # fmt: skip
    assert not outside, f"the image's user wrote outside {WRITABLE}: {outside[:20]}"


def test_numba_kernels_load_from_the_image_with_no_compile(platform_image, container_engine):
    """Every kernel, reached as the jobs reach them (core.warm_kernels), in a fresh
    container: its cache folder gains no file (a compile would write one)."""
    name = "s3tm-image-test-kernels"
    _run(container_engine, "rm", "-f", name)
    try:
        out = _ok(_run(container_engine, "run", "--name", name, "-e", "NUMBA_DEBUG_CACHE=1",
                       platform_image, "python", "-m", "core.warm_kernels"))  # fmt: skip
        changed = _ok(_run(container_engine, "diff", name))
    finally:
        _run(container_engine, "rm", "-f", name)
    loaded = set(re.findall(r"\[cache\] data loaded from '([^']+)'", out))
    saved = re.findall(r"\[cache\] data saved to (\S+)", out)
    # one data file per compiled signature: what this run loaded are files the build cached
    cached = _ok(_run(container_engine, "run", "--rm", platform_image, "find",
                      "/opt/s3tm/numba-cache", "-name", "*.nbc")).split()  # fmt: skip
    assert not saved, f"compiled and saved: {saved[:5]}"
    assert loaded and loaded <= set(cached), f"loaded {sorted(loaded - set(cached))[:5]}"
    assert "numba-cache/" not in changed, changed


def test_kernels_load_from_the_cache_under_a_read_only_root(platform_image, container_engine):
    """Pod Security "restricted" pods run on a read-only root filesystem with /tmp an
    emptyDir (infra/k8s): numba refuses a cached kernel whose cache folder it cannot write,
    so each Python process of the image copies the image's cache to /tmp as it starts
    (docker/numba_cache.py), and every kernel loads from that copy with no compile."""
    # as `kubectl exec` runs a command: not through the entrypoint
    script = (
        "import os; from core.warm_kernels import main; code = main(); "
        "print('cache=' + os.environ['NUMBA_CACHE_DIR']); raise SystemExit(code)"
    )
    done = _run(container_engine, "run", "--rm", "--read-only", "--tmpfs", "/tmp",
                "-e", "NUMBA_DEBUG_CACHE=1", "--entrypoint", "python", platform_image,
                "-c", script)  # fmt: skip
    out = _ok(done)
    assert "cache=/tmp/numba-cache" in out, out[-2000:]
    loaded = set(re.findall(r"\[cache\] data loaded from '([^']+)'", out))
    assert loaded and all(p.startswith("/tmp/numba-cache/") for p in loaded), sorted(loaded)[:5]
    assert not re.findall(r"\[cache\] data saved to (\S+)", out)


def test_the_image_has_what_airflow_on_kubernetes_needs(platform_image, container_engine):
    """The KubernetesExecutor (the Helm values' executor) and spark-submit k8s:// from
    Airflow's Spark provider need Airflow's Kubernetes provider."""
    check = (
        "from airflow.providers.cncf.kubernetes.executors.kubernetes_executor "
        "import KubernetesExecutor; print(KubernetesExecutor.__name__)"
    )
    out = _ok(_run(container_engine, "run", "--rm", platform_image, "python", "-c", check))
    assert out.strip().splitlines()[-1] == "KubernetesExecutor"


def test_task_logs_go_to_the_lakehouses_bucket_in_the_image(platform_image, container_engine):
    """With the Airflow settings of infra/k8s, the image's Airflow keeps task logs on S3
    (the Amazon provider's log IO) under the lakehouse, where the executor's deleting a
    task's pod cannot take them (the round trip through S3 runs in make k8s-demo)."""
    documents = rendered(REPO / "infra" / "k8s" / "overlays" / "dev")
    data = {
        name: document["data"]
        for document in documents
        if (name := document["metadata"]["name"]) in ("s3tm-config", "s3tm-airflow-config")
    }
    remote = {k: v for k, v in data["s3tm-airflow-config"].items() if "__LOGGING__" in k}
    check = (
        "import airflow.config_templates.airflow_local_settings as s; "
        "print(type(s.REMOTE_TASK_LOG).__name__, s.REMOTE_TASK_LOG.remote_base)"
    )
    env = {**remote, "S3TM_LAKEHOUSE": data["s3tm-config"]["S3TM_LAKEHOUSE"]}
    flags = [f"--env={k}={v}" for k, v in env.items()]
    out = _ok(_run(container_engine, "run", "--rm", *flags, platform_image, "python", "-c", check))
    lakehouse = data["s3tm-config"]["S3TM_LAKEHOUSE"]
    assert out.strip().splitlines()[-1] == f"S3RemoteLogIO {lakehouse}/airflow-logs"


def test_productions_login_is_fabs_with_the_secrets_admin(platform_image, container_engine):
    """prod's Airflow login: FAB's auth manager (in the image), its tables made by the
    migration, the admin made by the API server's init script of the prod overlay from the
    login Secret's passwords.json (a second run leaves it), and the API server's token
    endpoint issuing a token for that password and refusing another."""
    documents = rendered(REPO / "infra" / "k8s" / "overlays" / "prod")
    config = next(d for d in documents if d["metadata"]["name"] == "s3tm-airflow-config")["data"]
    api = next(d for d in documents if d["kind"] == "Deployment"
               and d["metadata"]["name"] == "airflow-api-server")  # fmt: skip
    init = api["spec"]["template"]["spec"]["initContainers"][0]
    assert init["args"][:2] == ["bash", "-ec"]
    password = "a-generated-password-7"
    check = (
        "import json, time, urllib.error, urllib.request\n"
        "def token(password):\n"
        "    request = urllib.request.Request('http://127.0.0.1:8080/auth/token', method='POST',\n"
        "        data=json.dumps({'username': 'admin', 'password': password}).encode(),\n"
        "        headers={'Content-Type': 'application/json'})\n"
        "    try:\n"
        "        with urllib.request.urlopen(request, timeout=10) as answer:\n"
        "            return answer.status, 'access_token' in json.load(answer)\n"
        "    except urllib.error.HTTPError as refused:\n"
        "        return refused.code, False\n"
        "for _ in range(90):\n"
        "    try:\n"
        "        urllib.request.urlopen('http://127.0.0.1:8080/api/v2/monitor/health', timeout=5)\n"
        "        break\n"
        "    except OSError:\n"
        "        time.sleep(2)\n"
        f"print('TOKEN', token({password!r}), token('wrong'))\n"
    )
    script = (
        "set -e; mkdir -p /tmp/login; "
        f"""echo '{{"admin": "{password}"}}' > /tmp/login/passwords.json; """
        "airflow db migrate >/dev/null 2>&1; "
        'bash -ec "$INIT" >/dev/null 2>&1; bash -ec "$INIT" >/dev/null 2>&1; '
        "airflow users list --output json 2>/dev/null | grep '^\\['; "
        "(airflow api-server --port 8080 >/dev/null 2>&1 &); "
        'python -c "$CHECK"'
    )
    env = {
        "AIRFLOW__CORE__AUTH_MANAGER": config["AIRFLOW__CORE__AUTH_MANAGER"],
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": "/tmp/login/passwords.json",
        "INIT": init["args"][2],
        "CHECK": check,
    }
    options = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
    out = _ok(_run(container_engine, "run", "--rm", *options, platform_image, "sh", "-c", script))
    (users,) = [json.loads(line) for line in out.splitlines() if line.startswith("[")]
    assert [(u["username"], u["roles"]) for u in users] == [("admin", ["Admin"])], users
    assert "TOKEN (201, True) (401, False)" in out, out[-2000:]


def test_the_spark_applications_job_file_is_in_the_image(platform_image, container_engine):
    """The matcher's SparkApplication names its job as a path inside the image (local://):
    the operator's spark-submit hands it to the driver, which runs it there."""
    matcher = next(
        d for d in rendered(REPO / "infra" / "k8s" / "overlays" / "prod")
        if d["kind"] == "SparkApplication"
    )  # fmt: skip
    path = matcher["spec"]["mainApplicationFile"].removeprefix("local://")
    assert path != matcher["spec"]["mainApplicationFile"], "a file inside the image: local://"
    _ok(_run(container_engine, "run", "--rm", platform_image, "test", "-f", path))
