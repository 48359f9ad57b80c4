"""Learners of the word -> matcher mapping: hash, SALB, salb2 and the word-network
baselines, with optional hot-word splitting; incremental remaps of a published mapping.

The names below load on first use (PEP 562): a module that needs only a light part of
this package (``core.learn.remap_params``, say) does not pay for the learners' imports
(scipy, METIS, the numba kernels).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.learn.api import (
        SPLITTING_ALGORITHMS,
        LearnedMapping,
        algorithm_label,
        align_to_published,
        learn_mapping,
        remap_incremental,
    )
    from core.learn.problem import LearningProblem, build_problem
    from core.learn.salb import SalbResult, learn_salb
    from core.learn.split import SplitPlan, plan_split
    from core.remap_options import ALGORITHMS

_MODULE_OF = {
    "ALGORITHMS": "core.remap_options",
    "SPLITTING_ALGORITHMS": "core.learn.api",
    "LearnedMapping": "core.learn.api",
    "algorithm_label": "core.learn.api",
    "align_to_published": "core.learn.api",
    "learn_mapping": "core.learn.api",
    "remap_incremental": "core.learn.api",
    "LearningProblem": "core.learn.problem",
    "build_problem": "core.learn.problem",
    "SalbResult": "core.learn.salb",
    "learn_salb": "core.learn.salb",
    "SplitPlan": "core.learn.split",
    "plan_split": "core.learn.split",
}

__all__ = [
    "ALGORITHMS",
    "SPLITTING_ALGORITHMS",
    "LearnedMapping",
    "LearningProblem",
    "SalbResult",
    "SplitPlan",
    "algorithm_label",
    "align_to_published",
    "build_problem",
    "learn_mapping",
    "learn_salb",
    "plan_split",
    "remap_incremental",
]


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'core.learn' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups find it directly
    return value
