"""The refinement kernel of ``salb2``: restreaming the tokens over SALB's mapping.

Each pass takes the tokens in SALB's order, lifts each one off its matcher and puts it back
on the matcher that scores best under linear deterministic greedy (LDG, Stanton and Kliot,
KDD 2012): ``covered(b) * (1 - load(b) / capacity)``, where ``covered(b)`` is the number of
the token's posts already routed to b. Co-occurring tokens are drawn together (the spread
falls) while a matcher's pull fades as it fills (balance holds); a matcher the move would
push past ``capacity`` is not a candidate. SALB's greedy places each token once, when few of
its neighbours are placed yet; restreaming lets every token see where all the others went.

Each pass has its own slack: capacity = ceil((1 + slack) x current total load / N). A
loose first pass lets groups of co-occurring tokens gather; later, tighter passes push the
tokens of overfull matchers out again (a matcher above the capacity is no candidate, not
even for its own tokens), so the final balance is the last slack's.

Incremental remaps (paper 004: moving state costs) start from the published mapping instead
of SALB's and give every token an *origin*, the matcher its subscriptions sit on today. A
candidate other than the origin scores ``penalty x move_cost`` lower (the subscriptions the
move re-places, in posts of gain per subscription), and leaving the origin is allowed only
while the moved subscriptions stay within ``budget``; going back to the origin refunds it.
Tokens with no origin (new words, new versions) move freely; a token not yet on any matcher
(-1) is placed by the same rule.

The routing state is SALB's: per post, a row of the distinct matchers routing it and how
many of its tokens sit on each, so lifting a token off a matcher drops the post from that
matcher exactly when the token was its last one there. Loads stay exact.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from core._prefetch import PREFETCH_DISTANCE, prefetch
from core.learn._salb_kernels import place_token


@njit(cache=True)
def _move(
    start: int,
    stop: int,
    home: int,
    target: int,
    edge_row: np.ndarray,
    rows: np.ndarray,
    loads: np.ndarray,
) -> None:
    """Move one token (edges ``start:stop``) from ``home`` to ``target``: one scan of each
    post's pairs finds both; home's pair is released before target's may be appended, so a
    post never needs more pairs than it has tokens."""
    for e in range(start, stop):
        if e + PREFETCH_DISTANCE < stop:
            prefetch(rows, edge_row[e + PREFETCH_DISTANCE])
        r = edge_row[e]
        n = rows[r]
        at_home = -1
        at_target = -1
        for j in range(n):
            m = rows[r + 1 + 2 * j]
            if m == home:
                at_home = j
            elif m == target:
                at_target = j
        home_tokens = r + 2 + 2 * at_home
        rows[home_tokens] -= 1
        if rows[home_tokens] == 0:
            n -= 1
            rows[r + 1 + 2 * at_home] = rows[r + 1 + 2 * n]
            rows[home_tokens] = rows[r + 2 + 2 * n]
            loads[home] -= 1
            if at_target == n:
                at_target = at_home
        if at_target >= 0:
            rows[r + 2 + 2 * at_target] += 1
        else:
            rows[r + 1 + 2 * n] = target
            rows[r + 2 + 2 * n] = 1
            n += 1
            loads[target] += 1
        rows[r] = n


@njit(cache=True)
def restream(
    token_indptr: np.ndarray,
    edge_row: np.ndarray,
    order: np.ndarray,
    token_matcher: np.ndarray,
    slacks: np.ndarray,
    rows: np.ndarray,
    loads: np.ndarray,
    origin: np.ndarray,
    move_cost: np.ndarray,
    penalty: float,
    budget: int,
    token_weight: np.ndarray,
    extra: np.ndarray,
) -> tuple[np.ndarray, int]:
    """Restream ``order``'s tokens once per slack, updating everything in place.

    Args:
        token_indptr: token -> edges CSR row pointers (int64).
        edge_row: per edge, the start of its post's row in ``rows``.
        order: int64 tokens to restream, in order.
        token_matcher: ``(n_tokens,)`` int32 matcher per token (-1: not placed yet),
            updated.
        slacks: float64, one per pass; stops early after a pass that moved nothing when
            the remaining slacks equal its own.
        rows, loads: the routing state (see module doc and ``_salb_kernels``).
        origin: ``(n_tokens,)`` int32, each token's matcher today (-1: none, moves free).
        move_cost: ``(n_tokens,)`` int64, subscriptions re-placed when it leaves its origin.
        penalty: score lost per subscription re-placed.
        budget: most subscriptions away from their origin at any time (< 0: no limit).
        token_weight: ``(n_tokens,)`` float64, load a token brings beside its posts (the
            matches its subscriptions emit, in posts; zeros: posts alone).
        extra: ``(N,)`` float64, the token weights on each matcher, updated.

    Returns:
        ``(moved, spent)``: tokens moved in each pass that ran (int64), and the move cost of
        the tokens that end away from their origin.
    """
    n_matchers = loads.shape[0]
    passes = slacks.shape[0]
    covered = np.zeros(n_matchers, dtype=np.int64)
    moved_per_pass = np.zeros(passes, dtype=np.int64)
    spent = 0
    ran = 0
    for it in range(passes):
        ran += 1
        moved = 0
        total = loads.sum() + extra.sum()
        capacity = max(1, int(np.ceil((1.0 + slacks[it]) * total / n_matchers)))
        for step in range(order.shape[0]):
            token = order[step]
            home = token_matcher[token]
            start = token_indptr[token]
            stop = token_indptr[token + 1]
            freq = stop - start
            alone = 0  # posts that only this token routes to its matcher
            source = origin[token]
            cost = move_cost[token] if source >= 0 else 0
            # may the token leave (or stay away from) its origin?
            can_leave = source < 0 or home != source or budget < 0 or spent + cost <= budget
            for e in range(start, stop):
                if e + PREFETCH_DISTANCE < stop:
                    prefetch(rows, edge_row[e + PREFETCH_DISTANCE])
                r = edge_row[e]
                for j in range(rows[r]):
                    m = rows[r + 1 + 2 * j]
                    covered[m] += 1
                    if m == home and rows[r + 2 + 2 * j] == 1:
                        alone += 1
            # score every matcher as if the token were lifted off its own
            weight = token_weight[token]
            if home >= 0:
                covered[home] -= alone
                loads[home] -= alone
                extra[home] -= weight
            best = -1
            best_score = 0.0
            fallback = -1
            fallback_load = 0.0
            for b in range(n_matchers):
                load = loads[b] + extra[b]
                new_load = load + freq - covered[b] + weight
                away = source >= 0 and b != source
                if away and not can_leave:
                    covered[b] = 0
                    continue
                if new_load <= capacity:
                    # LDG's covered x (1 - load / capacity), times the capacity (exact in
                    # float64 while the weights are zero: integers below 2^53)
                    score = covered[b] * (capacity - load)
                    if away:
                        score -= penalty * cost * capacity
                    if (
                        best < 0
                        or score > best_score
                        or (score == best_score and load < loads[best] + extra[best])
                    ):
                        best = b
                        best_score = score
                if fallback < 0 or new_load < fallback_load:
                    fallback = b
                    fallback_load = new_load
                covered[b] = 0
            if home >= 0:
                loads[home] += alone
                extra[home] += weight
            if best < 0:
                best = fallback  # nothing fits: the least loaded result
            if best != home:
                if source >= 0 and home == source:
                    spent += cost
                elif source >= 0 and best == source:
                    spent -= cost
                if home >= 0:
                    _move(start, stop, home, best, edge_row, rows, loads)
                else:
                    place_token(start, stop, best, edge_row, rows, loads)
                if home >= 0:
                    extra[home] -= weight
                extra[best] += weight
                token_matcher[token] = best
                moved += 1
        moved_per_pass[it] = moved
        if moved == 0 and np.all(slacks[it:] == slacks[it]):
            break
    return moved_per_pass[:ran], spent


@njit(cache=True)
def route_tokens(
    token_indptr: np.ndarray,
    edge_row: np.ndarray,
    n_row_entries: int,
    token_matcher: np.ndarray,
    n_matchers: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The routing state of a mapping (tokens at -1 route nowhere).

    Returns:
        ``(rows, loads)`` as SALB's kernel returns them (``n_row_entries`` long rows).
    """
    rows = np.zeros(n_row_entries, dtype=np.int32)
    loads = np.zeros(n_matchers, dtype=np.int64)
    for token in range(token_indptr.shape[0] - 1):
        matcher = token_matcher[token]
        if matcher >= 0:
            first, end = token_indptr[token], token_indptr[token + 1]
            place_token(first, end, matcher, edge_row, rows, loads)
    return rows, loads
