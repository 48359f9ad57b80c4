"""The reference the S3A and standalone-cluster tests compare with: the remap chain on a
small corpus, run once per worker on its local Spark session (``s3tm pipeline``'s steps in
one session), and only read afterwards."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# the small corpus both tests run their chain on (two days, so the window has a start)
REFERENCE_SPEC: dict[str, Any] = {"n_posts": 2500, "n_words": 1200, "seed": 9}
REFERENCE_NODES = 8


@dataclass(frozen=True)
class ReferenceChain:
    """corpus: the landed file; phrases: the subscriptions registered before the chain;
    lakehouse: the chain's tables (read them, never write: other tests share them)."""

    corpus: Path
    phrases: list[str]
    lakehouse: Path


def posts_of(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as lines:
        return [json.loads(line) for line in lines]


def reference_phrases(corpus: Path) -> list[str]:
    """Subscriptions of words the corpus has (validation refuses a mapping without them)."""
    from core.text import normalize

    texts = [post["text"] for post in posts_of(corpus)]
    return [" ".join(normalize(t)[:2]) for t in texts[:40:4] if normalize(t)]


def register_reference_subscriptions(root: str | Path, phrases: list[str]) -> None:
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.subscription_store import add_subscriptions

    add_subscriptions(Lakehouse(None, root, engine="rs"), phrases, "alice")


@pytest.fixture(scope="session")
def reference_chain(spark, tmp_path_factory: pytest.TempPathFactory) -> ReferenceChain:
    """``s3tm pipeline --batch-id 1 --nodes 8 --no-cooccurrence`` on the small corpus."""
    from core.corpus.synthetic import SyntheticCorpusSpec
    from spark_jobs.jobs import pipeline
    from spark_jobs.lake.corpus_files import write_demo_corpus
    from spark_jobs.lake.delta_io import Lakehouse

    folder = tmp_path_factory.mktemp("reference-chain")
    landing = folder / "landing"
    corpus = landing / "demo.jsonl.gz"
    write_demo_corpus(corpus, SyntheticCorpusSpec(**REFERENCE_SPEC), days=2)
    phrases = reference_phrases(corpus)
    lakehouse = folder / "lakehouse"
    register_reference_subscriptions(lakehouse, phrases)
    config = pipeline.PipelineConfig(
        landing=str(landing), batch_id=1, nodes=REFERENCE_NODES, cooccurrence=False
    )
    assert pipeline.run(config, Lakehouse(spark, lakehouse)) == 0
    return ReferenceChain(corpus=corpus, phrases=phrases, lakehouse=lakehouse)
