"""Generated bad input through the streaming job: no crash, and every line read is
accounted for: posts the stream processed + rows it quarantined (each with a reason) =
lines in the landing files; it accepts exactly the lines the batch ingest's rules accept
(with an id), and its matches equal brute force over those posts."""

from __future__ import annotations

import itertools
import shutil
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings

from core.corpus.records import parse_json_record
from core.text import normalize
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.subscription_store import register_word_sets
from spark_jobs.stream.matcher import start
from tests.hypothesis_tiers import examples
from tests.json_lines_strategies import count_lines, landing_files
from tests.spark_jobs.stream import harness

COUNTER = itertools.count()
# subscriptions over the words the generated texts use (unseen by the mapping: hashed)
SUBSCRIBED = [["white"], ["white", "house"], ["vote"], ["obama", "vote"], ["news"], ["info"]]


@pytest.fixture
def published(lakehouse, tmp_path):
    landing = harness.Landing(tmp_path / "corpus-landing", seed=3)
    sets = [sorted({normalize(w)[0] for w in words}) for words in SUBSCRIBED]
    register_word_sets(lakehouse, [" ".join(s) for s in sets], sets, "fuzzer")
    harness.publish_learned(lakehouse, landing, 4, "salb", split=True)
    return lakehouse


def _accepted(content: bytes) -> list[tuple[str, str]]:
    """(post id, text) of the lines the ingest's rules accept, with an id: the reference."""
    out = []
    for line in content.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
        record, _ = parse_json_record(line) if line.strip() else (None, "")
        if record is not None and record.get("id") is not None:
            out.append((str(record["id"]), record["text"]))
    return out


@settings(
    max_examples=examples(6),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(files=landing_files())
def test_every_streamed_line_is_processed_or_quarantined(spark, published, tmp_path, files):
    case = tmp_path / f"case-{next(COUNTER)}"
    shutil.copytree(published.root, case / "lakehouse")
    lakehouse = Lakehouse(spark, case / "lakehouse")
    landing = case / "landing"
    landing.mkdir()
    lines, accepted = 0, []
    # one known-good file in every case, so there is always something to match
    known = b'{"id": "known-1", "text": "White House vote"}\n{"id": "known-2", "text": "news"}\n'
    for k, content in enumerate([known, *files]):
        (landing / f"f{k}.jsonl").write_bytes(content)
        lines += count_lines(content)
        accepted += _accepted(content)
    args = harness.stream_config(
        case,
        SimpleNamespace(root=landing),
        max_files_per_trigger=0,
        query_name=f"fuzz_{case.name.replace('-', '_')}",
    )
    query, handler = start(spark, lakehouse, args)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    posts = sum(f.figures.posts for f in handler.figures)
    quarantine = (
        lakehouse.read_arrow("silver.posts_quarantine").to_pylist()
        if lakehouse.exists("silver.posts_quarantine")
        else []
    )
    assert posts + len(quarantine) == lines
    assert posts == len(accepted)
    assert all(r["reason"] and r["stage"] == "stream" for r in quarantine)
    subs = harness.active_subscriptions(lakehouse)
    expected = {
        (post, sub)
        for post, text in accepted
        for sub, words in subs.items()
        if words <= set(normalize(text))
    }
    assert len(expected) >= 3  # the known posts match
    assert set(harness.matches_of(lakehouse)) == expected
    shutil.rmtree(case, ignore_errors=True)
