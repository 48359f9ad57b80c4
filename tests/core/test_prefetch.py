"""The prefetch hint: emitted as LLVM's prefetch, and without effect on any value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit
from numba.core.errors import TypingError

from core._prefetch import prefetch
from tests.hypothesis_tiers import examples


@njit
def _gather_sum(values: np.ndarray, index: np.ndarray) -> int:
    total = 0
    for i in range(index.shape[0]):
        if i + 4 < index.shape[0]:
            prefetch(values, index[i + 4])
        total += values[index[i]]
    return total


def test_the_hint_is_an_llvm_prefetch() -> None:
    values = np.arange(10, dtype=np.int64)
    _gather_sum(values, np.array([1, 2], dtype=np.int64))
    (llvm_ir,) = _gather_sum.inspect_llvm().values()
    assert "llvm.prefetch" in llvm_ir


@settings(max_examples=examples(50), deadline=None)
@given(
    st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=200),
    st.data(),
)
def test_a_prefetching_gather_reads_the_same_values(values: list[int], data) -> None:  # type: ignore[no-untyped-def]
    array = np.array(values, dtype=np.int64)
    index = np.array(
        data.draw(st.lists(st.integers(0, len(values) - 1), max_size=300)), dtype=np.int64
    )
    assert _gather_sum(array, index) == int(array[index].sum())


def test_a_prefetch_of_a_non_array_does_not_compile() -> None:
    @njit
    def bad(x: int) -> None:
        prefetch(x, 0)  # type: ignore[arg-type]  # the point: numba refuses it

    with pytest.raises(TypingError):
        bad(3)
