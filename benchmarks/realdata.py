"""Where the real tweet corpus lives: ``../shared/data`` beside the project (never copied in)."""

from __future__ import annotations

from pathlib import Path

from core.errors import InputDataError
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


def corpus_or_real(corpus: str | None) -> Path | None:
    """The ``--corpus`` given, else the real corpus (None when absent too)."""
    return Path(corpus) if corpus else real_corpus_path()


def require_corpus(corpus: str | None) -> Path:
    """The ``--corpus`` given, else the real corpus; a clear error when there is none."""
    path = corpus_or_real(corpus)
    if path is None:
        raise InputDataError(
            f"corpus not found: pass --corpus FILE or set S3TM_SHARED_DATA to the folder "
            f"holding {REAL_CORPUS_NAME}"
        )
    if not path.is_file():
        raise InputDataError(f"corpus not found: {path}")
    return path
