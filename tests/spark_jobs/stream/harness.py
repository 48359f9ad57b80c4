"""What the stream tests share: a landing directory whose posts are remembered, the
brute-force reference (a subscription matches a post when its words are a subset of the
post's normalised words), and the query they run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus, render_post_text
from core.learn import learn_mapping
from core.text import normalize
from spark_jobs.jobs.place import place_version
from spark_jobs.jobs.publish import publish
from spark_jobs.lake.routing_store import register_table
from spark_jobs.stream.config import StreamConfig


class Landing:
    """Posts written to a landing directory one file at a time, remembered for the reference."""

    def __init__(self, root: Path, seed: int = 0) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.rng = np.random.default_rng(seed)
        self.corpus = generate_corpus(
            SyntheticCorpusSpec(
                n_posts=4000, n_words=400, n_topics=10, words_per_topic=30, seed=seed
            )
        )
        self.next_post = 0
        self.files = 0
        self.words: dict[str, set[str]] = {}  # post id -> normalised words
        self.file_of: dict[str, Path] = {}  # post id -> the landed file that holds it

    def write(
        self, n_posts: int, *, bad: list[str] | None = None, texts: tuple[str, ...] = ()
    ) -> list[str]:
        lines, ids = [], []
        for k, text in enumerate(texts):
            post_id = f"t{self.files:04d}-{k}"
            lines.append(json.dumps({"id": post_id, "text": text}))
            self.words[post_id] = set(normalize(text))
            ids.append(post_id)
        for _ in range(n_posts):
            p = self.next_post % self.corpus.n_posts
            post_id = f"p{self.next_post:06d}"
            self.next_post += 1
            words = self.corpus.vocabulary[
                self.corpus.indices[self.corpus.indptr[p] : self.corpus.indptr[p + 1]]
            ]
            text = render_post_text(list(words), self.rng)
            lines.append(json.dumps({"id": post_id, "text": text}))
            self.words[post_id] = set(normalize(text))
            ids.append(post_id)
        lines += bad or []
        # write then rename, as a producer must, so the source never sees half a file
        tmp = self.root / f".part-{self.files:04d}"
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        landed = self.root / f"posts-{self.files:04d}.jsonl"
        tmp.rename(landed)
        self.file_of.update(dict.fromkeys(ids, landed))
        self.files += 1
        return ids


def subscription_sets(landing: Landing, n: int, seed: int) -> list[list[str]]:
    """Tweet-based word sets (1-3 words of a post), so many of them match."""
    rng = np.random.default_rng(seed)
    corpus = landing.corpus
    out = []
    for _ in range(n):
        p = int(rng.integers(corpus.n_posts))
        words = corpus.vocabulary[corpus.indices[corpus.indptr[p] : corpus.indptr[p + 1]]]
        k = int(rng.integers(1, min(3, len(words)) + 1))
        out.append(sorted({normalize(w)[0] for w in rng.choice(words, k, replace=False)}))
    return out


def publish_learned(
    lakehouse, landing: Landing, n_matchers: int, algorithm: str, split: bool
) -> int:
    learned = learn_mapping(landing.corpus, n_matchers, algorithm, split=split, seed=1)
    version = register_table(lakehouse, learned.table, algorithm=algorithm)
    place_version(lakehouse, version, unit_cost=True)
    assert publish(lakehouse, version, skip_validation=True)["changed"]
    return version


def stream_config(tmp_path: Path, landing: Landing, **extra: Any) -> StreamConfig:
    """The tests' query: one landed file a batch, back to back, checkpoint under tmp_path."""
    values: dict[str, Any] = {
        "source": "files",
        "landing": str(landing.root),
        "checkpoint": str(tmp_path / "checkpoint"),
        "query_name": "test_matcher",
        "max_files_per_trigger": 1,
        "trigger_seconds": 0.0,
        "available_now": False,
        "seed": 0,
    }
    values.update(extra)
    return StreamConfig(**values)


def expected_matches(landing: Landing, post_ids, subs: dict[int, set[str]]) -> Counter:
    return Counter(
        (post, sub)
        for post in post_ids
        for sub, words in subs.items()
        if words <= landing.words[post]
    )


def active_subscriptions(lakehouse) -> dict[int, set[str]]:
    rows = lakehouse.read_arrow("subscriptions.registry").to_pylist()
    return {r["sub_id"]: set(r["words"]) for r in rows if r["cancelled_at"] is None}


def matches_of(lakehouse) -> Counter:
    return _pair_counts(lakehouse.read_arrow("matches"))


def _pair_counts(rows: pa.Table) -> Counter:
    """How many rows each (post, subscription) pair has."""
    return Counter(zip(rows["post_id"].to_pylist(), rows["sub_id"].to_pylist(), strict=True))


def assert_matches_equal(
    lakehouse, expected: Counter, landing: Landing | None = None, rows: pa.Table | None = None
) -> None:
    """``matches`` (or ``rows`` of its shape) equal ``expected`` exactly; when not, says how:
    pairs written twice, missing and extra, each with its batch, matcher and routing version
    (and the post's and subscription's words when ``landing`` is given) and the table's
    commits, instead of pytest's diff of two Counters, whose order differs."""
    from_table = rows is None
    rows = lakehouse.read_arrow("matches") if rows is None else rows
    got = _pair_counts(rows)
    if got == expected:
        return
    where: dict[tuple[str, int], list[tuple]] = {}
    columns = [c for c in ("batch_id", "matcher_id", "routing_version") if c in rows.column_names]
    for row in rows.select(["post_id", "sub_id", *columns]).to_pylist():
        key = (row["post_id"], row["sub_id"])
        where.setdefault(key, []).append(tuple(row[c] for c in columns))
    subs = active_subscriptions(lakehouse) if landing is not None else {}
    twice = sorted(k for k, n in got.items() if n > 1)
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    lines = [
        f"{'matches' if from_table else 'the rows'}: {sum(got.values())} rows, "
        f"brute force {sum(expected.values())}: "
        f"{len(twice)} pairs written more than once, {len(missing)} missing, {len(extra)} extra"
        f" (each pair: {', '.join(columns)})"
    ]
    for name, pairs in (("more than once", twice), ("missing", missing), ("extra", extra)):
        for post, sub in pairs[:12]:
            detail = f"  {name}: ({post!r}, {sub}) at {sorted(where.get((post, sub), []))}"
            if landing is not None:
                detail += (
                    f" sub words {sorted(subs.get(sub, set()))}"
                    f" post words {sorted(landing.words.get(post, set()))}"
                )
            lines.append(detail)
    if from_table:
        history = lakehouse.delta_table("matches").history()
        lines.append(
            "commits: "
            + "; ".join(
                f"v{c.get('version')} {c.get('operation')} {c.get('operationParameters', {})}"
                for c in history[:20]
            )
        )
    raise AssertionError("\n".join(lines))


def check_deliveries(lakehouse) -> None:
    """Deliveries = matches grouped per (post, subscriber), each pair once."""
    matches = lakehouse.read_arrow("matches").to_pylist()
    expected: dict[tuple[str, str], list[int]] = {}
    for row in matches:
        expected.setdefault((row["post_id"], row["subscriber"]), []).append(row["sub_id"])
    rows = lakehouse.read_arrow("deliveries").to_pylist()
    got = Counter((r["post_id"], r["subscriber"]) for r in rows)
    assert all(c == 1 for c in got.values()), "a post delivered twice to a subscriber"
    assert {(r["post_id"], r["subscriber"]): r["sub_ids"] for r in rows} == {
        k: sorted(v) for k, v in expected.items()
    }


def run_all(query) -> None:
    query.processAllAvailable()


def run_to_end(lakehouse, config: StreamConfig):
    """Start the matcher's stream on ``config``, run it over what is there and stop it;
    returns its batch handler."""
    from spark_jobs.stream.matcher import start

    query, handler = start(lakehouse.spark, lakehouse, config)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return handler


def publish_mid_stream(
    lakehouse, landing: Landing, config: StreamConfig, nodes: int, algorithm: str, *,
    split: bool, posts_after: int,
):  # fmt: skip
    """Run the stream over what has landed, publish a newly learned version while it runs,
    land ``posts_after`` more posts and run over them; returns the batch handler, the new
    version and the new posts' ids."""
    from spark_jobs.stream.matcher import start

    query, handler = start(lakehouse.spark, lakehouse, config)
    try:
        run_all(query)
        version = publish_learned(lakehouse, landing, nodes, algorithm, split=split)
        posts = landing.write(posts_after)
        run_all(query)
    finally:
        query.stop()
    return handler, version, posts


def assert_exact(lakehouse, landing: Landing, post_ids, *, at_least: int) -> Counter:
    """``matches`` equal the brute force over the active subscriptions (more than
    ``at_least`` pairs: the test has teeth) and ``deliveries`` group them; returns the
    brute force."""
    expected = expected_matches(landing, post_ids, active_subscriptions(lakehouse))
    assert sum(expected.values()) > at_least
    assert_matches_equal(lakehouse, expected, landing)
    check_deliveries(lakehouse)
    return expected


def run_stream_process(
    lakehouse,
    landing: Landing,
    checkpoint: Path,
    crash: str | None,
    extra: Sequence[str] = (),
    source: list[str] | None = None,
    engine: str | None = None,
):
    """``spark_jobs.stream.job run --available-now`` in a child process (killed by ``crash``);
    ``source``: the source's arguments (default: ``landing``, one file a batch); ``engine``:
    the Delta engine committing the batches' outputs (default: the configured one)."""
    env = dict(os.environ)
    env.pop("S3TM_CRASH", None)
    if engine:
        env["S3TM_DELTA_ENGINE"] = engine
    if crash:
        env["S3TM_CRASH"] = crash
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_jobs.stream.job",
            "--lakehouse",
            str(lakehouse.root),
            "--master",
            "local[2]",
            "run",
            *(source or ["--landing", str(landing.root), "--max-files-per-trigger", "1"]),
            "--checkpoint",
            str(checkpoint),
            "--available-now",
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
