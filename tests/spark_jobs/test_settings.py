"""The platform's settings: each ``S3TM_*`` variable declared once, read when asked for,
typed, and nowhere else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import InvalidArgumentError
from s3tm.orchestration.dag_support import dag_defaults
from spark_jobs.lake.delta_store import default_lakehouse
from spark_jobs.settings import PlatformSettings, env_name, settings, shown_default

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "spark_jobs", "s3tm", "benchmarks", "dags")


@pytest.fixture
def clean_env(monkeypatch):
    for field in PlatformSettings.model_fields:
        monkeypatch.delenv(env_name(field), raising=False)
    return monkeypatch


def test_unset_variables_give_the_declared_defaults(clean_env) -> None:
    platform = settings()
    for field, info in PlatformSettings.model_fields.items():
        assert getattr(platform, field) == info.get_default(call_default_factory=True), field


def test_a_variable_set_after_import_is_read_on_the_next_call(clean_env, tmp_path) -> None:
    clean_env.setenv("S3TM_LAKEHOUSE", str(tmp_path / "lake"))
    clean_env.setenv("S3TM_MATCHERS", "64")
    clean_env.setenv("S3TM_TASK_RETRIES", "0")
    assert default_lakehouse() == str(tmp_path / "lake")
    defaults = dag_defaults()
    assert (defaults.lakehouse, defaults.matchers) == (str(tmp_path / "lake"), 64)
    assert defaults.default_args["retries"] == 0
    clean_env.delenv("S3TM_LAKEHOUSE")
    assert default_lakehouse() == str(Path("lakehouse").resolve())  # ./lakehouse
    assert dag_defaults().lakehouse == str(REPO / "lakehouse")


@given(st.integers(min_value=1, max_value=10_000))
def test_typed_values_are_parsed(n: int) -> None:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("S3TM_MATCHERS", str(n))
        env.setenv("S3TM_SPARK_UI", "true")
        platform = settings()
    assert platform.matchers == n and platform.spark_ui is True


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("S3TM_MATCHERS", "sixteen"),
        ("S3TM_MATCHERS", "0"),
        ("S3TM_DELTA_ENGINE", "parquet"),
        ("S3TM_MATCHER_INDEX", "btree"),
        ("S3TM_POSTS_SOURCE", "ftp"),
    ],
)
def test_a_bad_value_is_refused_with_its_variable(clean_env, variable, value) -> None:
    clean_env.setenv(variable, value)
    with pytest.raises(InvalidArgumentError, match=f"^{variable}: "):
        settings()


def test_an_empty_variable_is_unset(clean_env) -> None:
    clean_env.setenv("S3TM_MATCHERS", "")
    clean_env.setenv("S3TM_DELTA_ENGINE", "")
    platform = settings()
    assert (platform.matchers, platform.delta_engine) == (16, "rs")


def test_variable_names_come_from_the_fields() -> None:
    assert env_name("spark_master") == "S3TM_SPARK_MASTER"
    with pytest.raises(InvalidArgumentError, match="no setting"):
        env_name("sparkmaster")
    assert shown_default("jars_dir") == "`.jars`" and shown_default("image") == "(none)"


def test_no_module_reads_an_s3tm_variable_but_the_settings() -> None:
    """``os.environ["S3TM_..."]``, ``.get("S3TM_...")`` and ``getenv("S3TM_...")`` appear
    nowhere in the packages: they ask ``settings()`` (or name a variable by ``env_name``)."""
    read = re.compile(r"""(environ\s*(\[|\.get\()|getenv\()\s*["']S3TM_""")
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if read.search(line)
    ]
    assert found == []
    # the check finds what it looks for
    assert read.search('x = os.environ.get("S3TM_LAKEHOUSE")')


def test_the_pipelines_steps_take_the_chains_options_of_the_same_name():
    """``s3tm pipeline``'s seed, N and learner reach the steps that have them; the rest of
    each step's options stay at its defaults (what ``s3tm <step>`` would do)."""
    from spark_jobs.jobs.graph import GraphConfig
    from spark_jobs.jobs.learn import LearnConfig
    from spark_jobs.jobs.normalise import NormaliseConfig
    from spark_jobs.jobs.pipeline import PipelineConfig, _step
    from spark_jobs.jobs.place import PlaceConfig

    chain = PipelineConfig(
        landing="posts/", nodes=7, algorithm="salb", split=False, seed=3, sample_rate=0.5,
        cooccurrence=True, holdout_fraction=0.1,
    )  # fmt: skip
    assert _step(LearnConfig, chain) == LearnConfig(
        nodes=7, algorithm="salb", split=False, seed=3, holdout_fraction=0.1
    )
    assert _step(NormaliseConfig, chain) == NormaliseConfig(sample_rate=0.5, seed=3)
    assert _step(GraphConfig, chain) == GraphConfig(cooccurrence=True)
    assert _step(PlaceConfig, chain) == PlaceConfig(seed=3)


def test_a_config_from_options_takes_the_shared_fields_and_the_given_ones():
    import dataclasses

    from spark_jobs.options import config_from

    @dataclasses.dataclass(frozen=True)
    class Options:
        nodes: int = 4
        sizes: str = "1,2"
        label: str = "cli only"

    @dataclasses.dataclass(frozen=True)
    class Config:
        sizes: tuple[int, ...]
        nodes: int = 16
        seed: int = 7

    assert config_from(Config, Options(nodes=9), sizes=(1, 2)) == Config((1, 2), nodes=9, seed=7)
    with pytest.raises(TypeError, match="no field"):
        config_from(Config, Options(), sizes=(1,), typo=3)
