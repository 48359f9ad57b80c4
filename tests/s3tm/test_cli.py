"""The s3tm command line, driven through main(argv) as a user would type it."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.corpus import holdout_mask
from core.routing.evaluate import evaluate_table
from s3tm.cli.main import main
from s3tm.mapping_files import load_table
from spark_jobs.lake.corpus_files import read_corpus

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "corpus.jsonl.gz"
    assert (
        main(
            ["demo-corpus", "--posts", "4000", "--words", "3000", "--seed", "3", "--out", str(path)]
        )
        == 0
    )
    return path


def _learn(corpus_file: Path, out: Path, *options: str) -> int:
    """``s3tm learn`` on the module's corpus into ``out``, with ``options``."""
    return main(["learn", "--corpus", str(corpus_file), *options, "--out", str(out)])


def test_learn_then_evaluate_on_the_held_out_posts(
    corpus_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "salb"
    assert _learn(corpus_file, out, "--nodes", "16", "--algorithm", "salb", "--split") == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["label"] == "salb+split" and manifest["n_matchers"] == 16
    assert manifest["source"]["holdout_fraction"] == 0.2
    assert manifest["training_posts"] < manifest["source"]["posts"] == 4000
    capsys.readouterr()

    assert main(["evaluate", "--mapping", str(out), "--corpus", str(corpus_file), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    # Recompute independently: the held-out posts of the same seeded split.
    corpus, _ = read_corpus(corpus_file)
    held_out = corpus.select(holdout_mask(corpus.n_posts, 0.2, 7))
    expected = evaluate_table(load_table(out), held_out)
    assert printed["candidate"]["n_posts"] == held_out.n_posts
    assert printed["candidate"]["loads"] == list(expected.candidate.loads)
    assert printed["relative_throughput"] == pytest.approx(expected.relative_throughput)

    assert (
        main(["evaluate", "--mapping", str(out), "--corpus", str(corpus_file), "--per-matcher"])
        == 0
    )
    text = capsys.readouterr().out
    assert "relative throughput vs hash" in text and "held-out posts" in text
    assert len([line for line in text.splitlines() if line.split()[:1] == ["15"]]) == 1


def test_subscribed_words_file(corpus_file: Path, tmp_path: Path) -> None:
    corpus, _ = read_corpus(corpus_file)
    words = corpus.vocabulary[:20].tolist()
    subs = tmp_path / "subs.txt"
    subs.write_text("# topic words\n" + "\n".join(words) + "\n")
    out = tmp_path / "hash"
    assert (
        _learn(
            corpus_file, out, "--nodes", "4", "--algorithm", "hash", "--subscribed-words", str(subs)
        )
        == 0
    )
    table = load_table(out)
    assert table.subscribed_words == frozenset(words)
    assert set(table.words.tolist()) <= set(words)


def test_evaluate_refuses_training_posts(
    corpus_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "all"
    assert (
        _learn(corpus_file, out, "--nodes", "4", "--algorithm", "salb", "--holdout-fraction", "0")
        == 0
    )
    capsys.readouterr()
    assert main(["evaluate", "--mapping", str(out), "--corpus", str(corpus_file)]) == 2
    assert "no hold-out" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [
                "learn",
                "--corpus",
                "/nonexistent.jsonl",
                "--nodes",
                "4",
                "--algorithm",
                "salb",
                "--out",
                "x",
            ],
            "corpus file not found",
        ),
        (["evaluate", "--mapping", "/nonexistent", "--corpus", "x"], "not a routing table"),
        (["demo", "--nodes", "4,zero"], "comma-separated integers"),
        (["demo-corpus", "--posts", "0", "--out", "x.jsonl"], "n_posts must be >= 1"),
    ],
)
def test_errors_are_one_clear_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("s3tm ")


def test_installed_entry_point_runs_the_demo(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("s3tm")
    done = subprocess.run(
        [
            str(script),
            "demo",
            "--no-airflow",  # the Airflow half is tested in tests/dags
            "--posts",
            "3000",
            "--nodes",
            "4,32",
            "--out",
            str(tmp_path / "demo"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = [line.split() for line in lines if line.split()[:1] in (["4"], ["32"])]
    assert [(r[0], r[1]) for r in rows] == [
        ("4", "hash"),
        ("4", "salb"),
        ("4", "salb+split"),
        ("4", "salb2"),
        ("32", "hash"),
        ("32", "salb"),
        ("32", "salb+split"),
        ("32", "salb2"),
    ]
    assert all(float(r[5]) == 1.0 for r in rows if r[1] == "hash")
    assert (tmp_path / "demo" / "mappings" / "salb+split-N32" / "mapping.parquet").is_file()


def test_bench_normalise_checks_exactness_and_writes_its_figures(tmp_path, capsys) -> None:
    import csv
    import json

    corpus = tmp_path / "posts.jsonl"
    texts = ["Running to the White House!! http://t.co/x", "It's &amp; caf\u00e9 \u2026"] * 60
    corpus.write_text(
        "".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts))
    )
    out = tmp_path / "out"
    argv = ["bench", "normalise", "--corpus", str(corpus), "--batch-posts", "50", "--runs", "1"]
    started = time.perf_counter()
    assert main([*argv, "--out", str(out)]) == 0
    wall_s = time.perf_counter() - started
    rows = list(csv.DictReader((out / "normalise.csv").open()))
    assert {r["way"] for r in rows} == {
        "normalize() per text",
        "normalize_arrow",
        "WordEncoder (ids)",
    }
    assert {r["tokens"] for r in rows} == {"cold", "warm"}
    for row in rows:
        seconds = float(row["us/post"]) * len(texts) / 1e6
        # a pass timed within the command's own wall time, its rate that time's inverse
        assert int(row["texts"]) == len(texts) and seconds <= wall_s
        assert float(row["posts/s"]) == pytest.approx(len(texts) / seconds, rel=0.02, abs=1)
        if row["way"] == "normalize() per text":
            assert float(row["x reference"]) == 1.0
    assert "x reference" in capsys.readouterr().out
    assert main(["bench", "normalise", "--corpus", str(tmp_path / "none.jsonl")]) != 0


def test_read_only_commands_answer_without_a_jvm(tmp_path: Path) -> None:
    """``routing list``, ``subscribe list`` and ``stream status`` read the driver-side tables
    through delta-rs: they succeed with no Java at all, and take ``--lakehouse`` after the
    action as every command group does."""
    import os

    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.subscription_store import add_subscriptions
    from tests.s3tm.small_lakehouse import publish_version

    root = tmp_path / "lakehouse"
    lake = Lakehouse(None, root, engine="rs")
    publish_version(lake, 1, 4)
    add_subscriptions(lake, ["white house", "vote"], "alice")
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java"), "PATH": os.defpath}
    outputs = {}
    for argv in (["routing", "list"], ["subscribe", "list"], ["stream", "status"]):
        done = subprocess.run(
            [sys.executable, "-m", "s3tm.cli.main", *argv, "--lakehouse", str(root)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "finished in" not in done.stderr  # no job log: nothing was started
        outputs[argv[0]] = done.stdout
    assert "published" in outputs["routing"] and "salb" in outputs["routing"]
    assert outputs["subscribe"].splitlines() == ["1\talice\thous white", "2\talice\tvote"]
    # no stream has run: it says so (and how to start one), not a traceback
    assert "no micro-batch committed yet" in outputs["stream"]


def _parsers(parser, path: str = "s3tm"):
    """Every parser of the command line (the commands' and their actions'), by path."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def field_docs(options: type) -> dict[str, str]:
    """The string under each field of a dataclass and of the dataclasses it extends."""
    import ast
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed(options.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body  # type: ignore[attr-defined]
        for field, under in itertools.pairwise(body):
            if (
                isinstance(field, ast.AnnAssign)
                and isinstance(field.target, ast.Name)
                and isinstance(under, ast.Expr)
                and isinstance(under.value, ast.Constant)
                and isinstance(under.value.value, str)
            ):
                docs[field.target.id] = under.value.value
    return docs


def test_field_docs_reads_the_strings_under_the_fields() -> None:
    from benchmarks.options import QualityBench

    docs = field_docs(QualityBench)
    assert docs["topic_pool"] == "most frequent words the topic model draws from"
    assert docs["split_seed"] == "seed of the hold-out split"  # from HoldoutOptions
    assert docs["out"].startswith("directory for the CSV")  # from OutOption


def test_every_option_has_plain_help() -> None:
    """Each option and argument of every command says what it is, and --help shows no
    reStructuredText (the module docstrings' double backquotes and roles)."""
    import argparse

    from s3tm.cli.main import build_parser

    undocumented, markup = [], []
    for path, parser in _parsers(build_parser()):
        if parser.description and ("``" in parser.description or ":func:" in parser.description):
            markup.append(path)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            name = "/".join(action.option_strings) or action.dest
            if not action.help or action.help == argparse.SUPPRESS:
                undocumented.append(f"{path} {name}")
            elif "``" in action.help:
                markup.append(f"{path} {name}")
        # options declared as a dataclass (s3tm.cli.options): each field's docstring
        options = parser.get_default("options_type")
        if options is not None:
            docs = field_docs(options)
            for field in dataclasses.fields(options):
                if not docs.get(field.name):
                    undocumented.append(f"{path} --{field.name.replace('_', '-')}")
                elif "``" in docs[field.name]:
                    markup.append(f"{path} --{field.name.replace('_', '-')}")
    assert len(list(_parsers(build_parser()))) > 40  # the walk reaches the nested commands
    assert undocumented == []
    assert markup == []


def test_the_lazy_command_registry_matches_what_the_groups_register() -> None:
    """``s3tm`` loads only the group of the command it runs; the names and help of the
    others come from ``COMMAND_GROUPS``, which must say what the groups register."""
    import argparse
    import importlib

    from s3tm.cli.main import _groups, build_parser

    for module_name, commands in _groups().items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module_name).register(sub)
        assert {a.dest: a.help for a in sub._choices_actions} == commands, module_name
    # a command's own parser is the full one; the others are placeholders
    lazy = build_parser("routing")
    full = build_parser()
    names = lambda p: [  # noqa: E731
        a.dest for a in p._subparsers._group_actions[0]._choices_actions
    ]
    assert names(lazy) == names(full)


def test_bench_outside_a_checkout_says_where_it_is(tmp_path) -> None:
    """The wheel and the image carry the platform only: `s3tm bench` there says it runs from
    a checkout (exit 2), while `s3tm --help` still lists every command."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "# as installed: the checkout is not on the path (make setup's .pth puts it there)\n"
        f"sys.path = [p for p in sys.path if p not in ('', {str(REPO)!r})]\n"
        "import s3tm.cli.main as cli\n"
        "sys.exit(cli.main(sys.argv[2:]))\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code, str(tmp_path), *argv],
            cwd=tmp_path,  # not the checkout: benchmarks/ is not importable from here
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    bench = run("bench", "learn", "--sizes", "100")
    assert bench.returncode == 2, bench.stderr
    assert "runs from a checkout" in bench.stderr
    listed = run("--help")
    assert listed.returncode == 0, listed.stderr
    assert "bench" in listed.stdout and "experiment" in listed.stdout
