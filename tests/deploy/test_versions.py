"""Every image tag and jar version of docker/ and infra/ is pinned, and the versions agree
with uv.lock's versions and with the jars pyspark ships (a wrong Delta or Hadoop jar
only fails at run time on a cluster, so it is caught here)."""

from __future__ import annotations

import re
import shutil
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pyspark
import yaml

from tests.deploy.kustomized import rendered

REPO = Path(__file__).resolve().parents[2]
DOCKER, INFRA = REPO / "docker", REPO / "infra"
POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def _pins() -> dict[str, str]:
    """The project's version and every locked package's (uv.lock: what runs here, in CI
    and in the image)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    pins = {p["name"]: p["version"] for p in lock["package"] if p["name"] != "s3tm"}
    return {**pins, "s3tm": project["version"]}


def _pom_properties() -> dict[str, str]:
    root = ET.parse(DOCKER / "jars" / "pom.xml").getroot()
    props = root.find("m:properties", POM_NS)
    assert props is not None
    return {child.tag.split("}", 1)[1]: (child.text or "") for child in props}


def _shipped_jar_version(prefix: str) -> str:
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob(f"{prefix}-*.jar"))
    assert jars, f"pyspark ships no {prefix} jar"
    return jars[0].name.removeprefix(f"{prefix}-").removesuffix(".jar")


def _dockerfile_images() -> dict[str, str]:
    text = (DOCKER / "Dockerfile").read_text()
    return dict(re.findall(r"^ARG (\w+_IMAGE)=(\S+)$", text, flags=re.M))


def _pinned(image: str) -> bool:
    name, _, tag = image.rpartition(":")
    return bool(name) and tag not in ("", "latest") and any(c.isdigit() for c in tag)


def test_jar_versions_match_pyspark_delta_and_the_hadoop_pyspark_ships():
    pins, props = _pins(), _pom_properties()
    assert props["spark.version"] == pins["pyspark"]
    assert props["delta.version"] == pins["delta-spark"]
    assert props["hadoop.version"] == _shipped_jar_version("hadoop-client-api")
    assert props["jackson.version"] == _shipped_jar_version("jackson-databind")
    scala = _shipped_jar_version("scala-library")
    assert scala.startswith(props["scala.binary.version"] + ".")
    # every dependency's version is a property above (none floats)
    root = ET.parse(DOCKER / "jars" / "pom.xml").getroot()
    for dependency in root.iterfind(".//m:dependencies/m:dependency", POM_NS):
        version = dependency.findtext("m:version", namespaces=POM_NS) or ""
        assert re.fullmatch(r"\$\{[a-z0-9.]+\}", version), ET.tostring(dependency)
    for plugin in root.iterfind(".//m:plugin", POM_NS):
        assert re.fullmatch(r"\d+(\.\d+)+", plugin.findtext("m:version", namespaces=POM_NS) or "")


def test_set_up_resolved_the_pom_and_adds_no_jar_spark_already_ships():
    """`make setup` resolved both profiles; the Spark profile brings Delta, S3A and the Kafka
    source and nothing pyspark ships already (a second Parquet or Jackson on the classpath
    fails at run time, far from the cause)."""
    from spark_jobs.lake.jars import KAFKA_BROKER, SPARK, classpath

    props = _pom_properties()
    entries = [Path(e) for e in classpath(SPARK)]
    assert entries, "run `make setup`: .jars/spark.classpath is missing"
    spark_jars = [e.name for e in entries]
    names = {e.parent.parent.name for e in entries}  # Maven's <artifact>/<version>/<jar>
    scala = props["scala.binary.version"]
    assert {
        f"delta-spark_{scala}",
        "delta-storage",
        "hadoop-aws",
        f"spark-sql-kafka-0-10_{scala}",
    } <= names
    assert f"delta-spark_{scala}-{props['delta.version']}.jar" in spark_jars
    shipped = [j.name for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")]
    twice = [
        (name, jar) for name in names for jar in shipped if re.match(re.escape(name) + r"-\d", jar)
    ]
    assert not twice, twice
    broker = [Path(e).name for e in classpath(KAFKA_BROKER)]
    assert f"kafka_{scala}-{props['kafka.version']}.jar" in broker


def test_dockerfile_images_are_pinned_and_consistent():
    pins, images = _pins(), _dockerfile_images()
    # Spark is pyspark's own distribution (uv.lock's version), not a Spark image
    assert set(images) == {"JAVA_IMAGE", "MAVEN_IMAGE", "PYTHON_IMAGE"}
    assert all(_pinned(image) for image in images.values()), images
    assert pins["pyspark"]
    python_tag = images["PYTHON_IMAGE"].rpartition(":")[2]
    assert python_tag.startswith("3.11."), python_tag  # pyproject: requires-python 3.11
    java_tag = images["JAVA_IMAGE"].rpartition(":")[2]
    assert java_tag.startswith("17."), java_tag
    # every FROM names a stage or one of the pinned ARG images
    text = (DOCKER / "Dockerfile").read_text()
    stages = set(re.findall(r"^FROM \S+ AS (\w+)$", text, flags=re.M))
    for source in re.findall(r"^FROM (\S+)", text, flags=re.M):
        assert source.strip("${}") in images or source in stages, source
    # the image installs with the uv the Makefile pins
    make_uv = re.search(r"^UV_VERSION := (\S+)$", (REPO / "Makefile").read_text(), flags=re.M)
    assert make_uv and f"uv=={make_uv.group(1)}" in text


def test_compose_and_kubernetes_images_are_pinned_and_name_this_release():
    pins = _pins()
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    platform = compose["x-platform"]["image"]
    # a third-party image: ${NAME_IMAGE:-public/image:tag}, the default pinned
    defaults = {
        name: re.sub(r"^\$\{\w+:-(.*)\}$", r"\1", s["image"])
        for name, s in compose["services"].items()
    }
    kafka_images = {image for image in defaults.values() if "kafka" in image}
    assert kafka_images == {f"docker.io/apache/kafka:{_pom_properties()['kafka.version']}"}
    assert platform.endswith(f":${{S3TM_VERSION:-{pins['s3tm']}}}"), platform
    for name, image in defaults.items():
        if compose["services"][name]["image"] != platform:
            assert _pinned(image), (name, image)
    documents = []
    for path in sorted((INFRA / "k8s").rglob("*.yaml")):
        # the local overlay names this machine's builds (docker/local), tagged as built
        if path.parent != INFRA / "k8s" / "overlays" / "local":
            documents += [d for d in yaml.safe_load_all(path.read_text()) if d]
    images = [
        value
        for doc in documents
        for key, value in _walk(doc)
        if key in ("image", "newTag") and isinstance(value, str)
    ]
    assert images and all(_pinned(i) or re.fullmatch(r"\d+(\.\d+)+", i) for i in images)
    matcher = next(d for d in documents if d.get("kind") == "SparkApplication")
    assert matcher["spec"]["sparkVersion"] == pins["pyspark"]
    assert matcher["spec"]["image"] == f"s3tm/platform:{pins['s3tm']}"
    # the task pods and the Spark pods they submit run the image of every other pod, named
    # once: the images transformer moves S3TM_IMAGE with the Deployments' images
    assert _airflow_images(INFRA / "k8s" / "base") == {f"s3tm/platform:{pins['s3tm']}"}


def _airflow_images(target: Path) -> set[str]:
    """The images Airflow's Deployments run, with the task pods' S3TM_IMAGE."""
    documents = rendered(target)
    images = {
        c["image"]
        for d in documents
        if d["kind"] == "Deployment" and d["metadata"]["name"].startswith("airflow-")
        and d["metadata"]["name"] != "airflow-statsd"
        for c in d["spec"]["template"]["spec"]["containers"]
        + d["spec"]["template"]["spec"].get("initContainers", [])
    }  # fmt: skip
    config = next(d for d in documents if d["metadata"]["name"] == "s3tm-airflow-config")
    return images | {config["data"]["S3TM_IMAGE"]}


def test_one_images_entry_moves_airflow_its_task_pods_and_their_spark_pods(tmp_path) -> None:
    """An overlay's `images:` entry (DEPLOY.md's registry step) retags Airflow's processes
    and S3TM_IMAGE, the task pods' and their Spark pods' image, together."""
    shutil.copytree(INFRA / "k8s", tmp_path / "k8s")
    overlay = tmp_path / "k8s" / "overlays" / "prod" / "kustomization.yaml"
    overlay.write_text(
        overlay.read_text()
        + "images:\n  - name: s3tm/platform\n"
        + "    newName: registry.example:5000/team/s3tm/platform\n    newTag: 9.9.9\n"
    )
    assert _airflow_images(tmp_path / "k8s" / "overlays" / "prod") == {
        "registry.example:5000/team/s3tm/platform:9.9.9"
    }


def _walk(node, key=None):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, k)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, key)
    else:
        yield key, node


def test_the_wheel_and_the_image_carry_the_platform_and_no_benchmark() -> None:
    """The wheel's packages are what setuptools finds with pyproject's include list; the
    image copies folders one by one. Neither takes benchmarks/ (s3tm bench / experiment
    run it from a checkout)."""
    from setuptools import find_packages

    found = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = find_packages(where=str(REPO), **found["packages"]["find"])
    tops = {p.split(".")[0] for p in packages}
    assert tops == {"core", "schemas", "spark_jobs", "s3tm"}, tops
    assert {"core.learn", "spark_jobs.stream", "s3tm.cli"} <= set(packages)
    dockerfile = (REPO / "docker" / "Dockerfile").read_text()
    copied = re.findall(r"^COPY (?:--\S+ )*(\S+) ", dockerfile, flags=re.MULTILINE)
    assert "core" in copied and "s3tm" in copied, copied
    assert not [c for c in copied if c.split("/")[0] in {"benchmarks", "tests", "."}], copied


def test_the_wheel_holds_no_launcher_and_no_dev_tool() -> None:
    """compose starts the S3 server, PostgreSQL, Prometheus and the Spark cluster, and the
    cluster demo drives compose (docker/cluster_demo.py): the package ships no launcher of
    its own for them (the tests' are in tests/support), nor the checkout's dev tools
    (devtools/: the Kafka broker of `s3tm kafka`, Airflow's processes, the demo; benchmarks/)."""
    from setuptools import find_packages

    found = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    modules = {
        f"{package}.{path.stem}"
        for package in find_packages(where=str(REPO), **found["packages"]["find"])
        for path in (REPO / package.replace(".", "/")).glob("*.py")
    }
    launchers = {"cluster_demo", "spark_cluster", "s3_server", "postgres", "prometheus"}
    assert not {m for m in modules if m.rsplit(".", 1)[1] in launchers}
    assert not {m for m in modules if m.split(".")[0] in {"devtools", "benchmarks"}}
    assert {"s3tm.cli.main", "spark_jobs.stream.job"} <= modules


def test_the_package_declares_ranges_and_this_environment_is_the_lock():
    """A team installs the package beside its own Airflow: pyproject declares ranges, never
    one exact version; uv.lock answers them (`uv lock --check`, from uv's cache), and every
    package this environment runs is the locked version (make setup syncs it --frozen)."""
    import subprocess
    import sys
    from importlib import metadata

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + [
        r for extra in project["optional-dependencies"].values() for r in extra
    ]
    exact = [r for r in declared if "==" in r]
    assert not exact, f"exact pins belong in uv.lock: {exact}"
    uv = Path(sys.executable).with_name("uv")
    checked = subprocess.run(
        [str(uv), "lock", "--check", "--offline"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    locked = _pins()
    installed = {
        name: metadata.version(name) for name in locked if name != "s3tm" and _installed(name)
    }
    assert len(installed) > 200  # the dev extra's whole tree
    differ = {n: (v, locked[n]) for n, v in installed.items() if v != locked[n]}
    assert not differ, f"installed, locked: {differ}"


def _installed(name: str) -> bool:
    from importlib import metadata

    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True
