"""docs/ is reference: every ``S3TM_*`` variable the code reads is in OPERATIONS.md's table,
RESULTS.md keeps current figures in at most 500 lines, and no page tells history (issue
numbers, run letters, commit hashes outside a command)."""

from __future__ import annotations

import re
from pathlib import Path

from spark_jobs.settings import PlatformSettings, env_name, settings_table

REPO = Path(__file__).resolve().parents[1]
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
CODE = ("core", "spark_jobs", "s3tm", "benchmarks", "dags", "docker", "tests", "infra")
VARIABLE = re.compile(r"\bS3TM_[A-Z0-9_]*[A-Z0-9]\b")


def _code_variables() -> set[str]:
    found: set[str] = set()
    for folder in CODE:
        for path in (REPO / folder).rglob("*"):
            if path.suffix in (".py", ".yaml", ".yml", ".sh", ".example") and path.is_file():
                found |= set(VARIABLE.findall(path.read_text(errors="replace")))
    found |= set(VARIABLE.findall((REPO / "Makefile").read_text()))
    return found


def _variables_section() -> str:
    text = (REPO / "docs" / "OPERATIONS.md").read_text()
    section = text[text.index("## Environment variables") :]
    return section[: section.index("\n## ")]


def _table_variables() -> set[str]:
    return set(re.findall(r"^\| `(S3TM_[A-Z0-9_]+)` \|", _variables_section(), flags=re.M))


def test_every_variable_the_code_reads_is_in_the_tables() -> None:
    """The settings' variables (named from their fields) and any other the code spells out."""
    declared = {env_name(field) for field in PlatformSettings.model_fields}
    in_code, in_table = _code_variables() | declared, _table_variables()
    assert len(in_table) >= 20  # the tables were found and parsed
    assert in_code - in_table == set(), "not in OPERATIONS.md's tables"
    assert in_table - in_code == set(), "in the tables, read by nothing"


def test_the_settings_table_is_the_declarations_rendering() -> None:
    """Each setting's row (default and meaning) is what spark_jobs/settings.py declares."""
    assert settings_table() in _variables_section()


def test_results_is_a_reference_of_at_most_500_lines() -> None:
    lines = (REPO / "docs" / "RESULTS.md").read_text().splitlines()
    assert len(lines) <= 500, len(lines)


def _prose(text: str) -> str:
    """The text without its code: fenced blocks and inline spans (commands may name a
    revision to compare against: ``--compare c33dd07``)."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def test_no_page_tells_history() -> None:
    for page in DOCS:
        prose = _prose(page.read_text())
        name = page.relative_to(REPO)
        assert re.findall(r"\b[Ii]ssues? #?\d+", prose) == [], name
        assert re.findall(r"\b[Rr]uns? [A-Z]\b", prose) == [], name
        hashes = [h for h in re.findall(r"\b[0-9a-f]{7,40}\b", prose) if re.search(r"[a-f]", h)]
        assert [h for h in hashes if re.search(r"\d", h)] == [], name


def test_the_prose_filter_keeps_what_it_should() -> None:
    """The checks above would pass on an empty filter: it drops code, and only code."""
    text = "Issue 3 in `--compare c33dd07` and\n```\nrun A\n```\nrun B at 4880889"
    assert _prose(text) == "Issue 3 in  and\n\nrun B at 4880889"


def test_operations_names_every_param_of_every_dag() -> None:
    """OPERATIONS.md's list of the DAGs' Params names each Param a DAG file declares, under
    that DAG's name."""
    text = (REPO / "docs" / "OPERATIONS.md").read_text()
    start = text.index("Params:\n")
    listed = text[start : text.index("A candidate that fails", start)]
    groups = {
        dag: set(re.findall(r"`(\w+)`", names))
        for names, dag in re.findall(r"([^()]+?)\((\w+)\)", listed)
    }
    for path in sorted((REPO / "dags").glob("s3tm_*.py")):
        declared = set(re.findall(r'^\s+"(\w+)": Param\(', path.read_text(), flags=re.M))
        dag = path.stem.removeprefix("s3tm_")
        assert declared, path
        assert groups.get(dag) == declared, (dag, declared, groups.get(dag))
