"""Options declared as dataclasses (s3tm.cli.options): argparse routes the command, tyro
parses the rest into a frozen instance whose fields are the options."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

import pytest

from benchmarks.options import DropBench, StreamBench
from s3tm.cli.main import main
from s3tm.cli.options import CompareOptions, OutOption, add_command


@dataclass(frozen=True, kw_only=True)
class Probe(OutOption, CompareOptions):
    """a command that hands back its options"""

    posts: int = 5
    """posts"""
    spark: bool = False
    """a flag"""
    master: str | None = None
    """a value or none"""


def _parse(argv: list[str]) -> Probe:
    parser = argparse.ArgumentParser(prog="s3tm")
    commands = parser.add_subparsers(dest="command", required=True)
    got: list[Probe] = []

    def handler(options: Probe) -> int:
        got.append(options)
        return 0

    add_command(commands, "probe", Probe, handler, prog="s3tm")
    args = parser.parse_args(["probe", *argv])
    assert args.handler(args) == 0
    return got[0]


def test_the_options_arrive_typed_with_the_declared_defaults() -> None:
    assert _parse([]) == Probe()
    options = _parse(["--posts", "7", "--spark", "--compare", "HEAD", "--out", "x"])
    assert (options.posts, options.spark, options.compare, options.out) == (7, True, "HEAD", "x")
    assert options.runs == 3 and options.master is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.posts = 8  # type: ignore[misc]


def test_a_bad_value_exits_2_naming_the_option(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parse(["--posts", "many"])
    assert exit_.value.code == 2
    assert "--posts" in capsys.readouterr().err


def test_help_is_the_declaration(capsys) -> None:
    """A command's help is its options' docstring, each option's help the string under it,
    in the group's list and in the command's own --help."""
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--help"])
    assert exit_.value.code == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert " ".join((DropBench.__doc__ or "").split()) in listed
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "stream", "--help"])
    assert exit_.value.code == 0
    shown = capsys.readouterr().out
    assert "--no-matches-table" in shown and "--file-posts" in shown
    assert "tweet=200000,topic=20000" in shown  # the declared default
    assert StreamBench().file_posts == "tweet=200000,topic=20000"
