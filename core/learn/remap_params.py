"""What a remap records about itself (the ``remap*`` keys of a routing version's params):
which remap ran, why, and how the full and incremental ones compared. A TypedDict, as it
crosses a JSON boundary (``routing.versions.params``); light to import."""

from __future__ import annotations

from typing import Literal, TypedDict


class RemapChoice(TypedDict, total=False):
    """``remap`` and ``remap_reason`` always; the rest when a published version was refined
    (``from_version``: which) and, for a full remap, how its matcher ids were aligned."""

    remap: Literal["full", "incremental"]
    remap_reason: str
    from_version: int
    moved_tokens: int
    moved_subscription_words: int
    move_budget: int
    incremental_training_throughput: float
    full_training_throughput: float
    remap_judged_on: str
    judged_posts: int
    incremental_judged_throughput: float
    full_judged_throughput: float
    full_remap_gain: float
    aligned_to_version: int
    aligned_kept_subscription_words: int
    unaligned_kept_subscription_words: int
