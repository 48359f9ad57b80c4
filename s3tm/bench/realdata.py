"""Where the real tweet corpus lives: ``../shared/data`` beside the project (never copied in)."""

from __future__ import annotations

import os
from pathlib import Path

REAL_CORPUS_NAME = "tweets-tweeteval.jsonl.gz"


def real_corpus_path() -> Path | None:
    """The real corpus file, or None when absent.

    Looks in ``$S3TM_SHARED_DATA``, then ``../shared/data`` from the working directory, then
    ``../shared/data`` from the project checkout.
    """
    candidates = []
    if os.environ.get("S3TM_SHARED_DATA"):
        candidates.append(Path(os.environ["S3TM_SHARED_DATA"]))
    candidates.append(Path.cwd().parent / "shared" / "data")
    candidates.append(Path(__file__).resolve().parents[2].parent / "shared" / "data")
    for folder in candidates:
        path = folder / REAL_CORPUS_NAME
        if path.is_file():
            return path
    return None
