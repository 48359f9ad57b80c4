"""Learners of the word -> matcher mapping: hash, SALB, salb2 and the word-network
baselines, with optional hot-word splitting; incremental remaps of a published mapping."""

from core.learn.api import (
    ALGORITHMS,
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
