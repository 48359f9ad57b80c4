"""Every ``s3tm`` command line shown in README.md and docs/*.md parses: no unknown
command, flag or choice (the docs drifted from the code before). Placeholders in capitals
(``DIR``, ``N``, ``DAY``...) stand for a value of the option's type."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from s3tm.cli.main import build_parser

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# what a placeholder stands for, by the type its option takes
PLACEHOLDERS = {
    "N": "1",
    "K": "1",
    "ID": "1",
    "VERSION": "1",
    "DAYS": "1",
    "HOURS": "1",
    "DAY": "2026-01-01",
    "DIR": "/tmp/dir",
    "FILE": "/tmp/file",
    "URL": "postgresql+psycopg2://u@h/db",
}


def documented_commands(text: str) -> list[str]:
    """The ``s3tm`` lines of the fenced shell blocks, continuations joined, comments cut."""
    commands = []
    for block in re.findall(r"```(?:bash|sh|console)?\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\s*\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip().removeprefix("$ ")
            line = re.sub(r"^(\.venv/bin/|\.\./\.venv/bin/)", "", line)
            if not line.startswith("s3tm "):
                continue
            # a trailing comment (outside quotes): shlex drops it
            commands.append(line)
    return commands


def _arguments(line: str) -> list[str]:
    """The argv of a documented line (one command per line: no ``a|b`` alternatives, no
    ``;`` sequences; optional parts in brackets count as given)."""
    words = shlex.split(line, comments=True)[1:]
    if any("|" in w or w.endswith(";") for w in words):
        raise AssertionError(f"`{line}` shows several commands: write one per line")
    argv = []
    for word in words:
        word = word.strip("[]")
        argv.append(PLACEHOLDERS.get(word, word))
    return [w for w in argv if w]


def test_the_extractor_finds_commands_and_joins_continuations() -> None:
    text = (
        "```bash\n.venv/bin/s3tm learn --nodes 4 \\\n--out m  # comment\nmake demo\n```\n"
        "```\ns3tm routing list\n```\n"
    )
    assert documented_commands(text) == [
        "s3tm learn --nodes 4 --out m  # comment",
        "s3tm routing list",
    ]
    assert _arguments("s3tm learn --nodes N --out DIR  # x") == [
        "learn",
        "--nodes",
        "1",
        "--out",
        "/tmp/dir",
    ]
    with pytest.raises(AssertionError, match="one per line"):
        _arguments("s3tm routing validate|publish")


CASES = [
    (doc.relative_to(REPO).as_posix(), line)
    for doc in DOCUMENTS
    for line in documented_commands(doc.read_text())
]


@pytest.mark.parametrize(("document", "line"), CASES)
def test_a_documented_command_parses(document: str, line: str) -> None:
    argv = _arguments(line)
    parser = build_parser()
    try:
        parser.parse_args(argv)
    except SystemExit as exit_:
        pytest.fail(f"{document}: `{line}` does not parse (exit {exit_.code})")


def test_every_document_with_commands_is_checked() -> None:
    assert {d for d, _ in CASES} >= {"README.md", "docs/OPERATIONS.md"}
    assert len(CASES) > 20


def test_paths_named_in_the_docs_and_docstrings_exist() -> None:
    """A test or source path quoted in the docs or a docstring names a file that exists."""
    named = set()
    for path in [*DOCUMENTS, *sorted(REPO.glob("[cdss]*/**/*.py"))]:
        if ".venv" in path.parts:
            continue
        named |= set(
            re.findall(
                r"`((?:tests|core|spark_jobs|s3tm|dags|schemas)/[\w/]+\.py)`", path.read_text()
            )
        )
    assert named, "the pattern finds the quoted paths"
    assert sorted(p for p in named if not (REPO / p).is_file()) == []
