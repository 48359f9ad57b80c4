"""Where the real tweet corpus lives: ``../shared/data`` beside the project (never copied in)."""

from __future__ import annotations

from pathlib import Path

from spark_jobs.settings import settings

TIMED_CORPUS_NAME = "tweets-ira-timed.jsonl.gz"
REAL_CORPUS_NAME = "tweets-tweeteval.jsonl.gz"


def real_corpus_path(name: str = REAL_CORPUS_NAME) -> Path | None:
    """The real corpus file ``name``, or None when absent.

    Looks in ``$S3TM_SHARED_DATA``, then ``../shared/data`` from the working directory, then
    ``../shared/data`` from the project checkout.
    """
    candidates = []
    shared = settings().shared_data
    if shared is not None:
        candidates.append(shared)
    candidates.append(Path.cwd().parent / "shared" / "data")
    candidates.append(Path(__file__).resolve().parents[1].parent / "shared" / "data")
    for folder in candidates:
        path = folder / name
        if path.is_file():
            return path
    return None


def timed_corpus_path() -> Path | None:
    """The real timestamped tweets (``created_at`` per post), or None when absent."""
    return real_corpus_path(TIMED_CORPUS_NAME)
