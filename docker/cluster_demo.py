"""``make cluster-demo``: docker/compose.yaml itself, in containers (podman, or Docker
where a user has it), from the platform image ``make image`` built.

It starts the compose file's services in the order their ``depends_on`` gives, each once
what it waits for is healthy or done; produces a generated corpus into Kafka; runs
``s3tm_ingest`` and ``s3tm_remap`` through Airflow's scheduler (triggered here, in order:
the schedules make no runs of their own during the demo) with every Spark job on the
standalone master: a first remap's hash candidate, which the publish gate keeps out (it
cannot beat hash), so the streaming matcher starts on the cluster routing by hash; a
second remap publishes a learned version while it runs; and checks what a deployment
promises: the stream switches from hash routing to the version between two micro-batches,
Prometheus' scrape equals the tables, every Spark application ran on the cluster, and no
secret is in any log. Then it removes the containers and volumes (``--keep`` leaves them running).

Where no container registry is reachable, compose's third-party images are replaced by
images docker/local/build.sh makes from Debian's packages, Maven's jars and PyPI (one
variable per image, as a team would set them); Grafana has no such image and is left out.

Podman runs health checks from systemd timers; on a host without systemd nothing runs
them, so this demo runs a service's health check itself while it waits for the service.

    .venv/bin/python docker/cluster_demo.py [--out DIR] [--posts N] [--keep]
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devtools.local.airflow.demo import timed

REPO = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO / "docker" / "compose.yaml"
PROJECT = "s3tm-demo"
BUCKET = "s3tm-lakehouse"
TOPIC = "posts"
START_TIMEOUT_S = 420.0
SWITCH_TIMEOUT_S = 420.0
# services a deployment runs that the demo does not start: the replay producer (the demo
# produces its own parts) and the matcher, started once a routing version is published
NOT_AT_START = {"producer", "matcher"}
PASSWORDS_FILE = "/opt/s3tm/state/airflow-passwords.json"


class DemoFailed(Exception):
    """A step failed; the message says which, and where to look."""


@dataclass(frozen=True)
class DemoConfig:
    """Run the platform as the compose file deploys it: a remap learned on the standalone
    cluster, the stream on it, and what each service did."""

    out: Path = Path("cluster-demo-output")
    """folder of the env file, the corpus and the logs"""
    posts: int = 30_000
    """posts in the corpus (a third learned from before the stream starts)"""
    matchers: int = 4
    """N (the topic's partitions)"""
    subscriptions: int = 500
    """subscriptions registered before the first remap"""
    keep: bool = False
    """leave the containers running"""


def say(text: str) -> None:
    print(text, flush=True)


@dataclass
class Engine:
    """The container engine and its compose command, for this demo's project."""

    name: str
    compose: list[str]
    env_file: Path
    log: Path
    secrets: list[str] = field(default_factory=list)

    @classmethod
    def find(cls, env_file: Path, log: Path) -> Engine:
        if shutil.which("podman"):
            tool = Path(sys.executable).parent / "podman-compose"
            compose = [str(tool)] if tool.exists() else ["podman-compose"]
            return cls("podman", compose, env_file, log)
        if shutil.which("docker"):
            return cls("docker", ["docker", "compose"], env_file, log)
        raise DemoFailed("neither podman nor docker is installed (apt-get install podman)")

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.name == "podman":
            env.setdefault("CONTAINERS_CONF", str(REPO / "docker" / "local" / "containers.conf"))
        return env

    def run(self, argv: list[str], *, check: bool = True, capture: bool = False) -> str:
        """A command with the engine's environment, logged; its output if ``capture``."""
        with self.log.open("a") as out:
            out.write(f"\n$ {' '.join(argv)}\n")
            out.flush()
            done = subprocess.run(
                argv,
                env=self.environment(),
                stdout=subprocess.PIPE if capture else out,
                stderr=out,
                text=True,
            )
        if check and done.returncode != 0:
            raise DemoFailed(f"`{' '.join(argv[:6])} ...` exited {done.returncode}; see {self.log}")
        return done.stdout if capture else ""

    def compose_args(self) -> list[str]:
        return [*self.compose, "-f", str(COMPOSE_FILE), "-p", PROJECT,
                "--env-file", str(self.env_file)]  # fmt: skip

    def compose_run(self, *argv: str, check: bool = True, capture: bool = False) -> str:
        return self.run([*self.compose_args(), *argv], check=check, capture=capture)

    def engine_run(self, *argv: str, check: bool = True, capture: bool = False) -> str:
        return self.run([self.name, *argv], check=check, capture=capture)

    def containers(self, service: str | None = None) -> list[str]:
        """The demo's containers, or ``service``'s (compose labels each with both)."""
        labels = [f"label=com.docker.compose.project={PROJECT}"]
        if service is not None:
            labels.append(f"label=com.docker.compose.service={service}")
        filters = [arg for label in labels for arg in ("--filter", label)]
        out = self.engine_run("ps", "-a", *filters, "--format", "{{.Names}}", capture=True,
                              check=False)  # fmt: skip
        return out.split()

    def container(self, service: str) -> str:
        """The container of ``service``."""
        names = self.containers(service)
        if not names:
            raise DemoFailed(f"no container of service {service!r}; see {self.log}")
        return names[0]

    def state(self, service: str) -> dict[str, Any]:
        out = self.engine_run("inspect", "--format", "{{json .State}}", self.container(service),
                              capture=True)  # fmt: skip
        return dict(json.loads(out))

    def healthy(self, service: str) -> bool:
        """Runs the container's health check (podman: nothing else does without systemd)."""
        if self.name == "podman":
            name = self.container(service)
            with self.log.open("a") as out:
                done = subprocess.run(["podman", "healthcheck", "run", name],
                                      env=self.environment(), stdout=out, stderr=out)  # fmt: skip
            return done.returncode == 0
        health = self.state(service).get("Health") or {}
        return health.get("Status") == "healthy"

    def exec_in(self, service: str, *argv: str) -> str:
        return self.engine_run("exec", self.container(service), *argv, capture=True)


def wait_until(title: str, ready: Callable[[], bool], timeout_s: float,
               failed: Callable[[], str | None] = lambda: None) -> None:  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while not ready():
        why = failed()
        if why:
            raise DemoFailed(f"{title}: {why}")
        if time.monotonic() > deadline:
            raise DemoFailed(f"{title}: not within {timeout_s:.0f}s")
        time.sleep(3)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def local_images(engine: Engine) -> dict[str, str]:
    """Compose's image variables: none where a registry is reachable (BASES=public), else
    the images docker/local/build.sh makes."""
    if os.environ.get("BASES") == "public" or engine.name != "podman":
        return {}
    out = engine.run([str(REPO / "docker" / "local" / "build.sh"), "podman", "services"],
                      capture=True)  # fmt: skip
    return dict(line.split("=", 1) for line in out.split() if "=" in line)


def write_env_file(path: Path, config: DemoConfig, images: dict[str, str]) -> dict[str, str]:
    """The demo's .env: docker/.env.example's settings, fresh secrets, small sizes."""
    from cryptography.fernet import Fernet

    values: dict[str, str] = {}
    for line in (REPO / "docker" / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    generated = {
        "POSTGRES_PASSWORD": secrets.token_urlsafe(24),
        "MINIO_ROOT_USER": "root-" + secrets.token_hex(4),
        "MINIO_ROOT_PASSWORD": secrets.token_urlsafe(24),
        "LAKEHOUSE_ACCESS_KEY": "s3tm-" + secrets.token_hex(6),
        "LAKEHOUSE_SECRET_KEY": secrets.token_urlsafe(30),
        "AIRFLOW_FERNET_KEY": Fernet.generate_key().decode(),
        "AIRFLOW_JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW_API_SECRET_KEY": secrets.token_urlsafe(32),
        "GRAFANA_ADMIN_PASSWORD": secrets.token_urlsafe(16),
    }
    values.update(generated)
    values.update(images)
    values.update(
        {
            "POSTS_PARTITIONS": str(config.matchers),
            # two 1-core, 2 GB workers; an application gets one core unless it asks
            "SPARK_WORKER_CORES": "1",
            "SPARK_WORKER_MEMORY": "2g",
            "SPARK_APP_CORES": "1",
            "S3TM_TASK_RETRIES": "0",
            "AIRFLOW_PORT": str(free_port()),
            "SPARK_UI_PORT": str(free_port()),
            "MINIO_CONSOLE_PORT": str(free_port()),
            "PROMETHEUS_PORT": str(free_port()),
            "GRAFANA_PORT": str(free_port()),
        }
    )
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    path.chmod(0o600)
    return values


def start_order(services: dict[str, Any], wanted: set[str]) -> list[str]:
    """``wanted`` services, each after the services it depends on."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in path:
            raise DemoFailed(f"compose.yaml: a dependency cycle through {name}")
        for needed in services[name].get("depends_on") or {}:
            visit(needed, (*path, name))
        order.append(name)

    for name in sorted(wanted):
        visit(name, ())
    return order


def up(engine: Engine, services: dict[str, Any], name: str) -> None:
    """Starts ``name`` once each service it depends on meets the condition compose names."""
    for needed, condition in (services[name].get("depends_on") or {}).items():
        wanted = condition["condition"] if isinstance(condition, dict) else "service_started"
        if wanted == "service_healthy":
            wait_until(f"{needed} healthy (for {name})", lambda n=needed: engine.healthy(n),
                       START_TIMEOUT_S, lambda n=needed: exited(engine, n))  # fmt: skip
        elif wanted == "service_completed_successfully":
            wait_until(f"{needed} done (for {name})", lambda n=needed: completed(engine, n),
                       START_TIMEOUT_S)  # fmt: skip
    engine.compose_run("up", "-d", "--no-deps", name)


def exited(engine: Engine, service: str) -> str | None:
    state = engine.state(service)
    if state.get("Status") == "exited" and state.get("ExitCode", 0) != 0:
        logs = f"{engine.name} logs {engine.container(service)}"
        return f"{service} exited {state['ExitCode']} (`{logs}`)"
    return None


def completed(engine: Engine, service: str) -> bool:
    state = engine.state(service)
    if state.get("Status") != "exited":
        return False
    if state.get("ExitCode") != 0:
        raise DemoFailed(
            f"{service} exited {state['ExitCode']}: "
            f"{engine.engine_run('logs', '--tail', '20', engine.container(service), capture=True)}"
        )
    return True


def in_platform(engine: Engine, out: Path, *argv: str) -> None:
    """A one-off container of the platform image on the compose network, with the demo's
    folder at /demo (what an operator's ``compose run`` does)."""
    engine.compose_run("run", "--rm", "--no-deps", "-v", f"{out}:/demo:ro", "metrics", *argv)


def query(engine: Engine, sql: str, sql_engine: str = "duckdb") -> list[dict[str, Any]]:
    """``s3tm sql`` in the running exporter's container (it holds the lakehouse's settings):
    DuckDB over the files (no JVM: the demo polls), or Spark SQL on the metastore."""
    text = engine.exec_in("metrics", "s3tm", "sql", "--engine", sql_engine, "--format", "json", sql)
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def committed(engine: Engine) -> list[dict[str, Any]]:
    """stream.batches' committed micro-batches, in order (none before the table exists)."""
    sql = (
        "SELECT batch_id, routing_version, posts, matches FROM stream.batches "
        "WHERE stage = 'committed' ORDER BY batch_id"
    )
    try:
        return query(engine, sql)
    except DemoFailed:
        return []


def switched(engine: Engine, total: int, version: int) -> bool:
    """The stream read ``total`` posts and its last batch ran on ``version``."""
    batches = committed(engine)
    return (
        bool(batches)
        and sum(b["posts"] for b in batches) >= total
        and batches[-1]["routing_version"] == version
    )


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def prometheus_value(port: str, expr: str) -> float | None:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    result = http_json(url)["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def run_dag(api: Any, dag_id: str, conf: dict[str, Any], title: str) -> None:
    with timed(title):
        run_id = api.trigger(dag_id, conf)
        state = api.wait_for(dag_id, run_id)
        if state != "success":
            raise DemoFailed(
                f"{dag_id} run {run_id} ended {state}; failed tasks: "
                f"{api.failed_tasks(dag_id, run_id)} (the Airflow UI shows their logs)"
            )


def check_logs(engine: Engine, values: dict[str, str], secret_names: list[str]) -> int:
    """Every container's log, searched for every generated secret: none may be there."""
    names = engine.containers()
    leaked = []
    for name in names:
        log = engine.engine_run("logs", name, check=False, capture=True)
        leaked += [f"{secret} in {name}" for secret in secret_names if values[secret] in log]
    if leaked:
        raise DemoFailed(f"secrets in the containers' logs: {', '.join(leaked)}")
    return len(names)


def keep_logs(engine: Engine, folder: Path) -> None:
    """Each container's log in ``folder`` before the containers go (a failed demo's
    evidence), and the end of each log of a container that exited with an error."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in engine.containers():
        done = subprocess.run([engine.name, "logs", name], env=engine.environment(),
                              capture_output=True, text=True)  # fmt: skip
        (folder / f"{name}.log").write_text(done.stdout + done.stderr)
        state = engine.engine_run("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}",
                                  name, capture=True, check=False).split()  # fmt: skip
        if state[:1] == ["exited"] and state[1:] != ["0"]:
            tail = "\n    ".join((done.stdout + done.stderr).splitlines()[-25:])
            print(f"\n{name} exited {state[1]}; its log ends:\n    {tail}", file=sys.stderr)
    print(f"\nevery container's log: {folder}", file=sys.stderr)


def run(config: DemoConfig) -> int:
    out = config.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    out.chmod(0o755)
    log = out / "cluster-demo.log"
    engine = Engine.find(out / "compose.env", log)
    say(f"S3-TM cluster demo: docker/compose.yaml in containers ({engine.name}); log: {log}")
    started = time.perf_counter()
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    services: dict[str, Any] = compose["services"]
    with timed("images of the third-party services"):
        images = local_images(engine)
    values = write_env_file(engine.env_file, config, images)
    secret_names = [k for k in values if any(s in k for s in ("PASSWORD", "SECRET", "FERNET"))]
    wanted = set(services) - NOT_AT_START
    if images and "GRAFANA_IMAGE" not in images:
        wanted.discard("grafana")
        say("    (no Grafana image can be made here: Grafana is left out)")
    engine.compose_run("down", "-v", check=False)  # what an earlier demo left
    try:
        for name in start_order(services, wanted):
            with timed(f"start {name}"):
                up(engine, services, name)
        for name in sorted(wanted):
            if "healthcheck" in services[name] and not name.endswith("-init"):
                wait_until(f"{name} healthy", lambda n=name: engine.healthy(n), START_TIMEOUT_S,
                           lambda n=name: exited(engine, n))  # fmt: skip
        the_demo(engine, config, out, services, values)
        count = check_logs(engine, values, secret_names)
        say(f"\nno secret in the logs of the {count} containers ({len(secret_names)} secrets)")
    except BaseException:
        keep_logs(engine, out / "logs")
        raise
    finally:
        if config.keep:
            say(f"\nthe containers keep running: {' '.join(engine.compose_args())} down -v")
        else:
            with timed("remove the containers and volumes"):
                engine.compose_run("down", "-v", check=False)
    say(f"\ncluster demo: done in {time.perf_counter() - started:.0f}s")
    return 0


def the_demo(engine: Engine, config: DemoConfig, out: Path, services: dict[str, Any],
             values: dict[str, str]) -> None:  # fmt: skip
    from devtools.local.airflow.api import AirflowApi
    from devtools.local.airflow.demo import write_corpus_parts

    learn, live_1, live_2 = write_corpus_parts(out, config.posts, config.subscriptions)
    produce = ["s3tm", "produce", "--bootstrap", "kafka:9092", "--topic", TOPIC, "--corpus"]
    with timed(f"produce {learn.name} into Kafka"):
        in_platform(engine, out, *produce, f"/demo/{learn.name}")
    passwords = json.loads(engine.exec_in("airflow-apiserver", "cat", PASSWORDS_FILE))
    user = values["AIRFLOW_ADMIN_USER"]
    api = AirflowApi(f"http://127.0.0.1:{values['AIRFLOW_PORT']}", passwords[user], user)
    say(f"    Airflow at http://127.0.0.1:{values['AIRFLOW_PORT']}: log in as {user!r} with "
        f"the password in {PASSWORDS_FILE} of the airflow-apiserver container")  # fmt: skip
    run_dag(api, "s3tm_ingest", {}, "s3tm_ingest: the topic into bronze.posts (Kafka)")
    with timed(f"register {config.subscriptions} subscriptions"):
        in_platform(engine, out, "s3tm", "subscribe", "load", "--subscriber", "demo",
                    "/demo/subscriptions.txt")  # fmt: skip
    matchers = config.matchers
    # a hash candidate cannot beat hash by the gate's margin: nothing is published and the
    # stream starts on hash routing (routing version -N), the floor every version must beat
    run_dag(api, "s3tm_remap", {"nodes": matchers, "algorithm": "hash", "split": False},
            "s3tm_remap: version 1 (hash), kept out by the publish gate")  # fmt: skip
    with timed("start the streaming matcher on the cluster"):
        up(engine, services, "matcher")
    with timed("the stream reads the topic (hash routing)"):
        wait_until(
            "the stream's first batch",
            lambda: any(b["posts"] > 0 for b in committed(engine)),
            SWITCH_TIMEOUT_S,
        )
    first = committed(engine)[0]["routing_version"]
    if first != -matchers:
        raise DemoFailed(f"the stream's first batch ran on {first}, not hash routing (-{matchers})")
    with timed(f"produce {live_1.name} into Kafka"):
        in_platform(engine, out, *produce, f"/demo/{live_1.name}")
    # margin 0: the gate judges by the stream's predicted speed-up, about 1.5% for salb2
    # over hash at the demo's 500 subscriptions (docs/RESULTS.md); the demo shows the switch
    run_dag(api, "s3tm_remap",
            {"nodes": matchers, "algorithm": "salb2", "incremental": False, "margin": 0.0},
            "s3tm_remap: version 2 (salb2), published while the stream runs")  # fmt: skip
    with timed(f"produce {live_2.name} into Kafka"):
        in_platform(engine, out, *produce, f"/demo/{live_2.name}")
    total = sum(1 for p in (learn, live_1, live_2) for _ in p.open())
    with timed("the stream switches to version 2 and reads the topic to its end"):
        wait_until("the stream's batches on version 2", lambda: switched(engine, total, 2),
                   SWITCH_TIMEOUT_S)  # fmt: skip
    with timed("stop the matcher (between two micro-batches)"):
        engine.compose_run("stop", "-t", "120", "matcher")
    summary = (
        "import os; from s3tm.monitoring.summary import summarize, summarize_stream, "
        "summarize_monitor; root = os.environ['S3TM_LAKEHOUSE']; "
        "summarize(root); summarize_stream(root); summarize_monitor(root)"
    )
    say(engine.exec_in("metrics", "python", "-c", summary))
    print_switch_over(committed(engine))
    print_catalog(engine)
    print_scraped(values["PROMETHEUS_PORT"], committed(engine))
    print_applications(values["SPARK_UI_PORT"])


def print_catalog(engine: Engine) -> None:
    """A team's query by table name through the metastore finds the published version."""
    sql = "SELECT routing_version, algorithm FROM routing.versions WHERE status = 'published'"
    rows = query(engine, sql, "catalog")
    if [row["routing_version"] for row in rows] != [2]:
        raise DemoFailed(f"routing.versions through the catalog: {rows}, not version 2")
    say(f"\nthe catalog (thrift://metastore:9083) names the tables: {sql}\n    -> {rows}")


def print_switch_over(batches: list[dict[str, Any]]) -> None:
    from spark_jobs.lake.routing_store import routing_label

    say("\nswitch-over (stream.batches):")
    for version in sorted({b["routing_version"] for b in batches}):
        mine = [b for b in batches if b["routing_version"] == version]
        say(f"  {routing_label(version)}: batches {mine[0]['batch_id']}-{mine[-1]['batch_id']}, "
            f"{sum(int(b['posts']) for b in mine):,} posts, "
            f"{sum(int(b['matches']) for b in mine):,} matches")  # fmt: skip


def print_scraped(port: str, batches: list[dict[str, Any]]) -> None:
    """Prometheus' sum of the exporter's posts counter, once it scraped the last batch,
    beside what stream.batches holds."""
    expected = sum(int(b["posts"]) for b in batches)
    expr = "sum(s3tm_stream_posts_total)"
    deadline = time.monotonic() + 120
    value = prometheus_value(port, expr)
    while value != expected and time.monotonic() < deadline:
        time.sleep(3)
        value = prometheus_value(port, expr)
    if value != expected:
        raise DemoFailed(f"Prometheus answers {expr} = {value}, stream.batches holds {expected}")
    version = prometheus_value(port, "s3tm_routing_published_version")
    say(f"\nPrometheus: {expr} = {value:,.0f} (stream.batches: {expected:,}); "
        f"s3tm_routing_published_version = {version:.0f}")  # fmt: skip


def print_applications(port: str) -> None:
    """What ran on the standalone master (its JSON status page): every Spark job of the
    DAGs' tasks and the stream, as applications of the cluster."""
    status = http_json(f"http://127.0.0.1:{port}/json/")
    counts: dict[str, int] = {}
    for app in status.get("completedapps", []) + status.get("activeapps", []):
        counts[app["name"]] = counts.get(app["name"], 0) + 1
    # each Spark job of s3tm_ingest, of both s3tm_remap runs, and the stream
    expected = {"s3tm-ingest": 1, "s3tm-normalise": 1, "s3tm-stream": 1}
    expected |= {f"s3tm-{job}": 2 for job in ("graph", "learn", "place", "evaluate")}
    missing = {name: n for name, n in expected.items() if counts.get(name, 0) < n}
    if missing:
        raise DemoFailed(f"the standalone master ran {counts}: fewer than {missing}")
    ran = ", ".join(f"{name} x{n}" for name, n in sorted(counts.items()))
    say(f"\nSpark applications the standalone master ran: {ran}")


def parse(argv: list[str] | None = None) -> DemoConfig:
    import tyro

    return tyro.cli(DemoConfig, args=argv, prog="docker/cluster_demo.py")


def main(argv: list[str] | None = None) -> int:
    from devtools.local.airflow.demo import run_until_done

    config = parse(argv)
    return run_until_done(
        "cluster demo", lambda: run(config), (DemoFailed,), cleaned_up="its containers are removed"
    )


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
