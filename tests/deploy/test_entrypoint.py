"""``docker/entrypoint.sh`` outside Spark's ``driver``/``executor`` modes: the command runs
as given, with the KubernetesExecutor's worker image taken from ``S3TM_IMAGE`` (the one
image name infra/k8s sets) when it is ``REPOSITORY:TAG`` and the operator set none, and
the remote task logs' folder taken from ``S3TM_LAKEHOUSE`` when remote logging is on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "docker" / "entrypoint.sh"
REPOSITORY = "AIRFLOW__KUBERNETES_EXECUTOR__WORKER_CONTAINER_REPOSITORY"
TAG = "AIRFLOW__KUBERNETES_EXECUTOR__WORKER_CONTAINER_TAG"


def _run(**env: str) -> tuple[dict[str, str], str]:
    own = (REPOSITORY, TAG, "S3TM_IMAGE", "S3TM_LAKEHOUSE", "AIRFLOW__LOGGING__REMOTE_LOGGING",
           "AIRFLOW__KUBERNETES_EXECUTOR__POD_TEMPLATE_FILE")  # fmt: skip
    base = {k: v for k, v in os.environ.items() if k not in own}
    done = subprocess.run(
        ["bash", str(SCRIPT), "env"], env={**base, **env}, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    seen = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return seen, done.stderr


@pytest.mark.parametrize(
    ("image", "repository", "tag"),
    [
        ("s3tm/platform:0.1.0", "s3tm/platform", "0.1.0"),
        ("registry.example:5000/team/s3tm/platform:2.0",
         "registry.example:5000/team/s3tm/platform", "2.0"),
    ],
)  # fmt: skip
def test_the_task_pods_image_is_s3tm_image(image: str, repository: str, tag: str) -> None:
    seen, _ = _run(S3TM_IMAGE=image)
    assert (seen[REPOSITORY], seen[TAG]) == (repository, tag)


@pytest.mark.parametrize(
    "image", ["s3tm/platform", "registry.example:5000/s3tm/platform", "s3tm/platform@sha256:ab"]
)
def test_a_name_that_does_not_split_is_said_and_left_to_the_operator(image: str) -> None:
    seen, said = _run(S3TM_IMAGE=image, AIRFLOW__KUBERNETES_EXECUTOR__POD_TEMPLATE_FILE="")
    assert REPOSITORY not in seen and TAG not in seen
    assert image in said and REPOSITORY in said


def test_an_image_by_digest_becomes_the_task_pod_templates_image(tmp_path: Path) -> None:
    """kustomize's `images:` with a digest writes REPOSITORY@sha256:... into S3TM_IMAGE:
    the task pods' template (infra/k8s) is copied with that image, and the executor reads
    the copy; the mounted template is left as it is."""
    import yaml

    from tests.deploy.kustomized import rendered, task_pod

    template = tmp_path / "pod-template.yaml"
    pod = task_pod(rendered(REPO / "infra" / "k8s" / "base"))
    template.write_text(yaml.safe_dump(pod))
    image = "registry.example/s3tm/platform@sha256:" + "0" * 64
    setting = "AIRFLOW__KUBERNETES_EXECUTOR__POD_TEMPLATE_FILE"
    (tmp_path / "tmp").mkdir()
    # the image's `python` (with PyYAML) is this one
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    seen, said = _run(
        S3TM_IMAGE=image, TMPDIR=str(tmp_path / "tmp"), PATH=path, **{setting: str(template)}
    )
    assert said == "" and REPOSITORY not in seen
    copy = yaml.safe_load(Path(seen[setting]).read_text())
    assert copy["spec"]["containers"][0]["image"] == image
    assert {k: v for k, v in copy["spec"].items() if k != "containers"} == {
        k: v for k, v in pod["spec"].items() if k != "containers"
    }
    assert "image" not in yaml.safe_load(template.read_text())["spec"]["containers"][0]


def test_the_operators_own_setting_and_no_image_are_left_alone() -> None:
    seen, _ = _run(S3TM_IMAGE="s3tm/platform:0.1.0", **{REPOSITORY: "mine/airflow", TAG: "7"})
    assert (seen[REPOSITORY], seen[TAG]) == ("mine/airflow", "7")
    seen, said = _run()
    assert REPOSITORY not in seen and said == ""


FOLDER = "AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER"


@pytest.mark.parametrize(
    ("lakehouse", "folder"),
    [
        ("s3://team-lake/main", "s3://team-lake/main/airflow-logs"),
        ("s3a://team-lake/main/", "s3://team-lake/main/airflow-logs"),
        ("s3://team-lake", "s3://team-lake/airflow-logs"),
    ],
)
def test_remote_task_logs_go_under_the_lakehouse(lakehouse: str, folder: str) -> None:
    seen, _ = _run(AIRFLOW__LOGGING__REMOTE_LOGGING="True", S3TM_LAKEHOUSE=lakehouse)
    assert seen[FOLDER] == folder


def test_remote_logging_off_or_a_folder_of_the_operators_is_left_alone() -> None:
    seen, _ = _run(S3TM_LAKEHOUSE="s3://team-lake/main")
    assert FOLDER not in seen
    seen, _ = _run(
        AIRFLOW__LOGGING__REMOTE_LOGGING="true",
        S3TM_LAKEHOUSE="s3://team-lake/main",
        **{FOLDER: "s3://team-logs/airflow"},
    )
    assert seen[FOLDER] == "s3://team-logs/airflow"


def test_remote_logging_with_no_object_store_lakehouse_is_said_and_fails() -> None:
    env = {**os.environ, "AIRFLOW__LOGGING__REMOTE_LOGGING": "True", "S3TM_LAKEHOUSE": "/data/lake"}
    done = subprocess.run(
        ["bash", str(SCRIPT), "env"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "/data/lake" in done.stderr and FOLDER in done.stderr
