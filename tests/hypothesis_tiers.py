"""How many examples a property-based test draws: its own count in the full suite (CI),
a fifth of it (at least 10) in the quick tier (``make check``, ``S3TM_TEST_TIER=check``)."""

from __future__ import annotations

import os

QUICK = os.environ.get("S3TM_TEST_TIER") == "check"


def examples(full: int) -> int:
    return max(10, full // 5) if QUICK else full
