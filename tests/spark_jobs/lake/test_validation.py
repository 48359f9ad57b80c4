"""Great Expectations gates: a good candidate validates, corrupted ones are rejected and
never published; results are kept and rendered as Data Docs under the lakehouse."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import corpus_from_word_lists
from core.learn import learn_mapping
from schemas import table
from spark_jobs.jobs import publish
from spark_jobs.lake.routing_store import add_version, now_utc, write_mapping, write_placements
from spark_jobs.lake.subscription_store import add_subscriptions
from spark_jobs.lake.validation import data_docs_index, eligible_placements, silver_frame
from tests.hypothesis_tiers import examples

POSTS = [["white", "hous"], ["elect", "white"], ["hous", "vote"], ["vote"], ["elect"]] * 20


def _candidate(lakehouse, version: int, *, corrupt: str | None = None) -> None:
    add_subscriptions(lakehouse, ["white house", "vote"], "alice") if version == 1 else None
    words = ["hous", "vote", "white"]
    learned = learn_mapping(corpus_from_word_lists(POSTS), 4, "salb", subscribed_words=words)
    routing = learned.table
    if corrupt == "unmapped":  # a subscribed word missing from the mapping
        frame = routing.to_frame()
        frame = frame[frame["word"] != "vote"]
        routing = type(routing).from_rows(
            frame["word"], frame["part"], frame["matcher_id"], 4, subscribed_words=words
        )
    write_mapping(lakehouse, version, routing)
    add_version(
        lakehouse,
        {
            "routing_version": version,
            "algorithm": "salb",
            "n_matchers": 4,
            "params": json.dumps({"label": "salb"}),
            "inputs": "{}",
            "subscribed_words": words,
            "metrics": None,
            "validation": None,
            "status": "candidate",
            "created_at": now_utc(),
            "published_at": None,
            "retired_at": None,
        },
    )
    from core.placement.lasp import place_subscriptions
    from spark_jobs.lake.subscription_store import active_corpus

    placement = place_subscriptions(routing, active_corpus(lakehouse))
    matchers = placement.matchers.copy()
    if corrupt == "ineligible":  # a subscription placed where none of its words live
        owners = {int(m) for w in ["vote"] for m in routing.version_matchers(w)}
        matchers[-1] = next(m for m in range(4) if m not in owners)
    sub_ids, indptr = placement.sub_ids, placement.indptr
    if corrupt == "unplaced":  # an active subscription with no placement in the version
        sub_ids, indptr, matchers = sub_ids[:-1], indptr[:-1], matchers[: indptr[-2]]
    write_placements(lakehouse, version, sub_ids, indptr, matchers)


def _silver(lakehouse, duplicate=False):
    rows = [
        {
            "post_id": f"p{i}",
            "words": w,
            "n_words": len(w),
            "event_day": dt.date(2026, 1, 1),
            "created_at": None,
            "sample_rate": 1.0,
        }
        for i, w in enumerate(POSTS)
    ]
    if duplicate:
        rows.append(dict(rows[0]))
    lakehouse.write_arrow(
        pa.Table.from_pylist(rows, schema=table("silver.posts").schema),
        "silver.posts",
        mode="overwrite",
    )


def test_good_candidate_validates_and_publishes_with_data_docs(lakehouse, capfd):
    _silver(lakehouse)
    _candidate(lakehouse, 1)
    result = publish.validate_version(lakehouse, 1)
    assert result["success"], result
    printed = capfd.readouterr()
    assert "Calculating Metrics" not in printed.out + printed.err  # no progress bars in a log
    assert {s["suite"] for s in result["suites"]} == {
        "routing_mappings",
        "routing_placements",
        "subscriptions_placed",
        "silver_posts",
    }
    assert data_docs_index(lakehouse).is_file()
    # the project GX made says no usage analytics
    project = next(Path(lakehouse.root).rglob("great_expectations.yml"))
    settings = yaml.safe_load(project.read_text())
    assert settings["analytics_enabled"] is False
    assert settings["progress_bars"]["globally"] is False
    assert publish.publish(lakehouse, None)["published"] == 1
    # the suite sees each word list as its length: no Python list per row to fingerprint
    frame = silver_frame(lakehouse).sort_values("post_id", key=lambda c: c.str[1:].astype(int))
    assert frame["words"].tolist() == [len(w) for w in POSTS]


@pytest.mark.parametrize(
    ("corrupt", "suite", "expectation"),
    [
        ("unmapped", "routing_mappings", "expect_column_distinct_values_to_contain_set"),
        ("ineligible", "routing_placements", "expect_column_values_to_be_in_set"),
        ("unplaced", "subscriptions_placed", "expect_column_values_to_be_in_set"),
    ],
)
def test_corrupted_candidate_is_rejected_and_not_published(lakehouse, corrupt, suite, expectation):
    _silver(lakehouse)
    _candidate(lakehouse, 1)
    assert publish.validate_version(lakehouse, 1)["success"]
    publish.publish(lakehouse, 1)
    _candidate(lakehouse, 2, corrupt=corrupt)
    result = publish.validate_version(lakehouse, 2)
    assert not result["success"]
    failed = {(s["suite"], f["expectation"]) for s in result["suites"] for f in s["failed"]}
    assert (suite, expectation) in failed
    with pytest.raises(Exception, match="rejected"):
        publish.publish(lakehouse, 2)
    assert publish.published_version(lakehouse) == 1


def test_duplicate_silver_ids_fail_the_silver_suite(lakehouse):
    _silver(lakehouse, duplicate=True)
    _candidate(lakehouse, 1)
    result = publish.validate_version(lakehouse, 1)
    silver = next(s for s in result["suites"] if s["suite"] == "silver_posts")
    assert not silver["success"]
    assert any(f["expectation"] == "expect_column_values_to_be_unique" for f in silver["failed"])


def test_data_docs_render_offline_and_ask_nothing_of_the_internet(lakehouse, chromium, tmp_path):
    """The Data Docs pages as a platform team opens them on a cluster without internet: with
    every host but loopback unresolvable, the pages are styled, the index's table is filled
    by its script, the logo shows; and no request leaves the machine (no CDN, no vendor)."""
    from playwright.sync_api import sync_playwright

    _silver(lakehouse)
    _candidate(lakehouse, 1)
    assert publish.validate_version(lakehouse, 1)["success"]
    site = data_docs_index(lakehouse).parent
    validation_page = next((site / "validations").rglob("*.html"))
    requested: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                # no internet: every name but loopback's fails to resolve
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("request", lambda request: requested.append(request.url))
            for html in (site / "index.html", validation_page):
                page.goto(html.as_uri())
                page.wait_for_load_state("load")
                # Bootstrap's style sheet applied (the navbar is a flex box), its logo shown
                assert (
                    page.evaluate("getComputedStyle(document.querySelector('nav.navbar')).display")
                    == "flex"
                ), html
                assert page.evaluate("document.querySelector('nav.navbar img').naturalWidth") > 0, (
                    html
                )
                page.screenshot(path=str(tmp_path / f"{html.stem}.png"))
            page.goto((site / "index.html").as_uri())
            page.wait_for_load_state("load")
            # bootstrap-table's script built the index's table from the page's data
            rows = page.locator(".bootstrap-table table tbody tr")
            rows.first.wait_for(timeout=30_000)
            assert rows.count() >= 3  # a validation result per suite
            assert "routing_mappings" in page.inner_text("body")
        finally:
            browser.close()
    off_site = [u for u in requested if not u.startswith(("file://", "data:"))]
    assert requested and off_site == []


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["hous", "vote", "white", "elect", "zzz", "qq"]), min_size=1,
                 max_size=4, unique=True),
        min_size=1, max_size=12,
    ),
    st.lists(st.tuples(st.integers(8, 24), st.integers(0, 3)), max_size=40),
    st.integers(1, 5),
)  # fmt: skip
def test_eligible_placements_equal_the_obvious_loop_over_word_versions(
    word_sets, placed, chunk
) -> None:
    """The eligibility of each placement, as columns and in chunks, equals asking the
    routing table word by word (mapped, split and unmapped words: the hash matcher); a
    placement of an id that is not an active subscription is never eligible."""
    from spark_jobs.lake import validation

    learned = learn_mapping(corpus_from_word_lists(POSTS), 4, "salb", split=True)
    routing = learned.table
    sub_ids = np.arange(10, 10 + len(word_sets), dtype=np.int64)
    words_of = dict(zip(sub_ids.tolist(), word_sets, strict=True))
    subs = np.array([s for s, _ in placed], dtype=np.int64)
    matchers = np.array([m for _, m in placed], dtype=np.int64)
    old, validation.ELIGIBLE_CHUNK = validation.ELIGIBLE_CHUNK, chunk
    try:
        got = eligible_placements(
            routing, sub_ids, pa.chunked_array([pa.array(word_sets)]), subs, matchers
        )
    finally:
        validation.ELIGIBLE_CHUNK = old
    expected = [
        s in words_of and any(m in routing.version_matchers(w).tolist() for w in words_of[s])
        for s, m in placed
    ]
    assert got.tolist() == expected


@pytest.mark.parametrize("corrupt", [None, "ineligible", "unplaced"])
def test_the_frames_are_the_same_whatever_the_registry_batches(lakehouse, corrupt, monkeypatch):
    """The registry is read in batches (bounded memory at 10M subscriptions): one row a
    batch gives the frames one batch gives, flaws included."""
    from spark_jobs.lake import validation

    _candidate(lakehouse, 1, corrupt=corrupt)
    whole = validation.validation_frames(lakehouse, 1)
    monkeypatch.setattr(validation, "REGISTRY_BATCH", 1)
    batched = validation.validation_frames(lakehouse, 1)
    for name, frame in whole.items():
        pd.testing.assert_frame_equal(
            batched[name].sort_values(list(frame.columns[:2])).reset_index(drop=True),
            frame.sort_values(list(frame.columns[:2])).reset_index(drop=True),
        )
    placements = whole["routing_placements"]
    assert placements["eligible"].all() == (corrupt != "ineligible")
    assert whole["subscriptions_placed"]["placed"].all() == (corrupt != "unplaced")
