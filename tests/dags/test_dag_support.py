"""Where spark-submit finds a job: the environment decides (the Helm values set
``local://`` for Kubernetes cluster mode), never an edit of a DAG file."""

from __future__ import annotations

from s3tm.orchestration.dag_support import JOBS, application_path


def test_application_path_is_a_file_by_default_and_local_uri_on_kubernetes(monkeypatch):
    monkeypatch.delenv("S3TM_SPARK_APPLICATION_SCHEME", raising=False)
    assert application_path("learn") == str(JOBS / "learn.py")
    assert (JOBS / "learn.py").is_file()
    monkeypatch.setenv("S3TM_SPARK_APPLICATION_SCHEME", "local")
    assert application_path("learn") == f"local://{JOBS / 'learn.py'}"


def test_spark_submit_gets_the_image_and_the_object_store_settings_from_the_pod():
    """On Kubernetes the drivers and executors start in pods of their own: the task pod's
    image and object-store settings are handed on, nothing else."""
    from s3tm.orchestration.dag_support import submit_conf

    conf = submit_conf(
        {
            "S3TM_IMAGE": "s3tm/platform:1.2.3",
            "AWS_ENDPOINT_URL": "http://minio:9000",
            "AWS_REGION": "eu-west-1",
            "AWS_SECRET_ACCESS_KEY": "never-forwarded",
        }
    )
    assert conf["spark.kubernetes.container.image"] == "s3tm/platform:1.2.3"
    assert conf["spark.kubernetes.driverEnv.AWS_ENDPOINT_URL"] == "http://minio:9000"
    assert conf["spark.executorEnv.AWS_REGION"] == "eu-west-1"
    assert not any("SECRET" in key for key in conf)
    assert submit_conf({}) == {}


def test_the_remap_dags_n_follows_the_deployment(tmp_path):
    """S3TM_MATCHERS (compose: POSTS_PARTITIONS; Kubernetes: s3tm-config) is the `nodes`
    param's default: N said once per deployment."""
    import json
    import os
    import subprocess
    import sys

    script = (
        "import json, sys\n"
        "sys.path.insert(0, 'dags')\n"
        "import s3tm_remap\n"
        "dag = s3tm_remap.s3tm_remap()\n"
        "print(json.dumps(dag.params.dump()['nodes']))\n"
    )
    for value, expected in (("64", 64), ("", 16)):
        env = {**os.environ, "S3TM_MATCHERS": value}
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout.strip().splitlines()[-1]) == expected


def test_the_remap_dags_params_default_to_the_declarations():
    """Each remap Param with a counterpart defaults to what the learn job's config and the
    publish gate declare (core.remap_options), and the learn job's command line to the
    same: one value each, whichever way a remap is started."""
    import json
    import subprocess
    import sys

    from core.remap_options import ALGORITHMS, DEFAULT_MARGIN
    from spark_jobs.jobs.learn import LearnConfig
    from spark_jobs.options import parse_job

    script = (
        "import json, sys\n"
        "sys.path.insert(0, 'dags')\n"
        "import s3tm_remap\n"
        "dag = s3tm_remap.s3tm_remap()\n"
        "print(json.dumps({'defaults': dag.params.dump(),\n"
        "                  'enum': dag.params.get_param('algorithm').schema['enum']}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dag = json.loads(done.stdout.strip().splitlines()[-1])
    job = LearnConfig()
    command_line, _ = parse_job(LearnConfig, [], prog="learn", description="")
    for name in ("algorithm", "split", "max_moved", "full_remap_gain"):
        assert dag["defaults"][name] == getattr(job, name) == getattr(command_line, name), name
    assert dag["defaults"]["margin"] == DEFAULT_MARGIN
    assert dag["enum"] == list(ALGORITHMS)
