"""The per-post value estimate and the drop it ranks: hashed prefixes against a plain-Python
reference, the drop's invariants, and value against random drop on posts with known matches."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidArgumentError
from core.shedding._kernels import unit_draw
from core.shedding._value_kernels import VALUE_SALT
from core.shedding.drop import (
    LENGTH_BIN,
    LENGTH_BINS,
    drop_lines,
    kept_byte_share,
    length_histogram,
)
from core.shedding.plan import ShedPlan
from core.shedding.post_value import (
    PREFIX,
    ValueTable,
    keep_most_valuable,
    line_values,
    object_lines,
    word_values,
)
from tests.hypothesis_tiers import examples

_TOKEN = re.compile(rb"[a-z0-9\x80-\xff]+")


def _fnv(token: bytes) -> int:
    h = 2166136261
    for b in token[:PREFIX]:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def _reference_value(line: bytes, table: ValueTable) -> float:
    mask = table.buckets.shape[0] - 1
    hashes = {_fnv(t) for t in _TOKEN.findall(line.lower())}
    return float(sum(float(table.buckets[h & mask]) for h in hashes))


WORDS = ["happi", "match", "dog", "été", "x1", "tweet", "stream"]


@settings(max_examples=examples(200), deadline=None)
@given(
    texts=st.lists(st.text(max_size=80), max_size=20),
    values=st.lists(st.floats(0, 10), min_size=len(WORDS), max_size=len(WORDS)),
)
def test_line_values_equal_the_plain_python_reference(texts, values) -> None:
    table = ValueTable.from_words(WORDS, np.array(values), bits=8)  # small: collisions too
    lines = [f'{{"id": "p{i}", "text": {t!r}}}'.encode() for i, t in enumerate(texts)]
    got = line_values(pa.array(lines, pa.binary()), table)
    want = [_reference_value(line, table) for line in lines]
    assert got == pytest.approx(want, rel=1e-5, abs=1e-4)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.text(alphabet=" \t\n\x0b\x0c\r{x\u00e9[", max_size=6),
            st.binary(max_size=6),
        ),
        max_size=30,
    )
)
def test_object_lines_equal_the_regex(lines) -> None:
    raw = pa.array([x.encode() if isinstance(x, str) else x for x in lines], pa.binary())
    want = pc.fill_null(pc.match_substring_regex(raw, r"^\s*\{"), False).to_pylist()
    assert object_lines(raw).tolist() == want
    assert object_lines(raw.slice(1)).tolist() == want[1:]


def test_raw_words_meet_their_stemmed_forms() -> None:
    table = ValueTable.from_words(["happi", "match"], np.array([1.0, 2.0]))
    values = line_values(pa.array(["Happy MATCHES, happy!", "sad", None]), table)
    assert values.tolist() == [3.0, 0.0, 0.0]  # each distinct token once; a null is empty


def test_word_values_are_the_mean_over_a_words_versions() -> None:
    # word 0: one version; word 1: split in two; word 2: none
    values = word_values(np.array([4.0, 1.0, 3.0]), np.array([0, 1, 3]), np.array([1, 2, 0]))
    assert values.tolist() == [4.0, 2.0, 0.0]
    with pytest.raises(InvalidArgumentError):
        word_values(np.array([1.0]), np.array([0, 1]), np.array([1, 1]))


@settings(max_examples=examples(200), deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 7.0]), max_size=60),
    fraction=st.floats(0, 0.95),
    exempt_every=st.integers(2, 10),
    seed=st.integers(0, 1000),
)
def test_the_least_valuable_posts_go(values, fraction, exempt_every, seed) -> None:
    v = np.array(values)
    exempt = np.arange(v.shape[0]) % exempt_every == 0
    keep = keep_most_valuable(v, fraction, exempt, seed)
    assert keep[exempt].all()
    candidates = int((~exempt).sum())
    assert int((~keep).sum()) == min(round(fraction * v.shape[0]), candidates)
    kept_candidates = keep & ~exempt
    if (~keep).any() and kept_candidates.any():
        assert v[~keep].max() <= v[kept_candidates].min()
    assert (keep_most_valuable(v, fraction, exempt, seed) == keep).all()  # replayable


@settings(max_examples=examples(200), deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 7.0]) | st.floats(0, 9), max_size=80),
    fraction=st.floats(0, 0.95),
    exempt_every=st.integers(2, 10),
    seed=st.integers(0, 1000),
)
def test_the_selection_drops_what_a_full_sort_would(values, fraction, exempt_every, seed) -> None:
    """The kernel selects (linear time); the slow obvious version sorts every candidate by
    (value, seeded draw, position) and drops the first ones."""
    v = np.array(values, dtype=np.float64)
    exempt = np.arange(v.shape[0]) % exempt_every == 0
    candidates = [i for i in range(v.shape[0]) if not exempt[i]]
    ordered = sorted(candidates, key=lambda i: (v[i], unit_draw(seed, i, VALUE_SALT), i))
    want = np.ones(v.shape[0], dtype=np.bool_)
    want[ordered[: round(fraction * v.shape[0])]] = False
    assert keep_most_valuable(v, fraction, exempt, seed).tolist() == want.tolist()


def test_equal_values_drop_at_random_not_by_position() -> None:
    keep = keep_most_valuable(np.zeros(1000), 0.5, None, 3)
    assert (~keep).sum() == 500
    assert 200 < (~keep[:500]).sum() < 300  # not the first half


def test_a_drop_keeps_the_exempt_sample_and_every_line_it_cannot_read() -> None:
    lines = pa.array(
        [b'{"id": "1", "text": "a dog"}'] * 200 + [b"not json", b"  ", None, b"[1]"], pa.binary()
    )
    plan = ShedPlan(utility="yield", level=2, max_spread=4.0, exempt_fraction=0.1,
                    drop_fraction=0.6)  # fmt: skip
    dropped = drop_lines(plan, lines, seed=11)
    assert dropped.keep[-4:].all()  # judged and quarantined downstream, never dropped
    assert dropped.keep[dropped.sampled].all()
    assert dropped.dropped == min(round(0.6 * len(lines)), int((~dropped.sampled[:200]).sum()))
    again = drop_lines(plan, lines, seed=11)
    assert (again.keep == dropped.keep).all() and (again.sampled == dropped.sampled).all()
    nothing = drop_lines(ShedPlan(), lines, seed=11)
    assert nothing.keep.all() and nothing.dropped == 0


def test_a_value_table_needs_a_power_of_two() -> None:
    with pytest.raises(InvalidArgumentError):
        ValueTable(np.zeros(3, dtype=np.float32))
    with pytest.raises(InvalidArgumentError):
        keep_most_valuable(np.zeros(3), 1.0, None, 0)


@given(
    st.lists(st.integers(0, 3000), min_size=1, max_size=300),
    st.sampled_from([0.0, 0.05, 0.3, 0.5, 0.75, 0.9]),
)
def test_kept_byte_share_is_the_bytes_of_the_longest_lines(lengths, drop) -> None:
    counts = length_histogram(np.array(lengths))
    # brute force over the binned lengths: each line at its bin's middle, longest first
    binned = np.sort(
        (np.minimum(np.array(lengths) // LENGTH_BIN, LENGTH_BINS - 1) + 0.5) * LENGTH_BIN
    )[::-1]
    keep = (1 - drop) * len(lengths)
    whole = int(np.floor(keep))
    expected = binned[:whole].sum() + (keep - whole) * (binned[whole] if whole < len(binned) else 0)
    assert kept_byte_share(counts, drop) == pytest.approx(expected / binned.sum())
    assert kept_byte_share(counts, drop) >= (1 - drop) - 1e-9  # the longest hold the most


def test_kept_byte_share_of_equal_lines_is_the_share_of_lines() -> None:
    counts = length_histogram(np.full(1000, 140))
    assert kept_byte_share(counts, 0.4) == pytest.approx(0.6)
    assert kept_byte_share(np.zeros(LENGTH_BINS), 0.4) == pytest.approx(0.6)
