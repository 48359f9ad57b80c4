"""numba kernel of LASP (paper 001, Alg. 2) and of random anycast.

Eligibility (Sect. 5.1): the owners of the subscription's regular (unsplit) words; a
subscription made only of split words is multicast to the owners of every version of its
split word with the fewest versions.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _add_distinct(out: np.ndarray, n: int, matcher: int) -> int:
    """Append ``matcher`` to ``out[:n]`` unless already there; returns the new length."""
    for j in range(n):
        if out[j] == matcher:
            return n
    out[n] = matcher
    return n + 1


@njit(cache=True)
def _eligible(
    sub_words: np.ndarray,
    part_start: np.ndarray,
    part_count: np.ndarray,
    part_matchers: np.ndarray,
    out: np.ndarray,
) -> tuple[int, bool]:
    """Fill ``out`` with distinct eligible matchers; returns (count, multicast)."""
    n = 0
    for w in sub_words:
        if part_count[w] == 1:
            n = _add_distinct(out, n, part_matchers[part_start[w]])
    if n > 0:
        return n, False
    best = sub_words[0]
    for w in sub_words:
        if part_count[w] < part_count[best]:
            best = w
    for k in range(part_count[best]):
        n = _add_distinct(out, n, part_matchers[part_start[best] + k])
    return n, True


@njit(cache=True)
def place(
    sub_indptr: np.ndarray,
    sub_words: np.ndarray,
    part_start: np.ndarray,
    part_count: np.ndarray,
    part_matchers: np.ndarray,
    word_count: np.ndarray,
    unique: np.ndarray,
    subscriptions_on: np.ndarray,
    slope: float,
    intercept: float,
    random_anycast: bool,
    seed: int,
    keep: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Place subscriptions one at a time, on top of the matchers' current contents.

    Args:
        sub_indptr, sub_words: subscriptions as CSR of word ids (distinct within each).
        part_start, part_count, part_matchers: the routing table aligned to those ids.
        word_count: ``(N, n_words)`` int32, subscriptions on matcher i holding word w;
            updated in place (H(i) = the words with a count above 0).
        unique: ``(N,)`` int64 |H(i)|, updated in place.
        subscriptions_on: ``(N,)`` int64 subscriptions placed on each matcher, updated in
            place: of matchers with equal utility, the one holding the fewest wins.
        slope, intercept: f(x) = slope * x + intercept, the fitted matching cost.
        random_anycast: pick a uniformly random eligible matcher instead of LASP.
        keep: ``(n_subs,)`` int32, the matcher a subscription sits on today (-1: none); it
            stays there while that matcher is still eligible (an incremental remap moves
            only the subscriptions whose words moved away).

    Returns:
        ``(placement_indptr, placement_matchers)``.
    """
    n_matchers = unique.shape[0]
    n_subs = sub_indptr.shape[0] - 1
    cost_sum = 0.0  # sum over matchers of f(|H(j)|)
    cost_sq = 0.0
    for i in range(n_matchers):
        c = slope * unique[i] + intercept
        cost_sum += c
        cost_sq += c * c
    out_indptr = np.zeros(n_subs + 1, dtype=np.int64)
    out = np.empty(sub_words.shape[0] + n_subs * 4, dtype=np.int32)
    n_out = 0
    eligible = np.empty(n_matchers + sub_words.shape[0], dtype=np.int32)
    np.random.seed(seed)
    for s in range(n_subs):
        words = sub_words[sub_indptr[s] : sub_indptr[s + 1]]
        n_el, multicast = _eligible(words, part_start, part_count, part_matchers, eligible)
        kept = -1
        if not multicast and keep[s] >= 0:
            for j in range(n_el):
                if eligible[j] == keep[s]:
                    kept = j
                    break
        if multicast:
            chosen_from, chosen_n = 0, n_el
        elif kept >= 0:
            chosen_from, chosen_n = kept, 1
        elif random_anycast:
            chosen_from, chosen_n = np.random.randint(0, n_el), 1
        else:
            best_u = -np.inf
            best_j = 0
            for j in range(n_el):
                i = eligible[j]
                new = 0
                for w in words:
                    if word_count[i, w] == 0:
                        new += 1
                delta = slope * new + intercept  # l = f(|S \\ H(i)|)
                old_cost = slope * unique[i] + intercept
                new_cost = slope * (unique[i] + new) + intercept
                total = cost_sum - old_cost + new_cost
                sq = cost_sq - old_cost * old_cost + new_cost * new_cost
                mean = total / n_matchers
                var = max(sq / n_matchers - mean * mean, 0.0)
                cv = np.sqrt(var) / mean if mean > 0 else 0.0
                u = -delta * cv
                # Ties go to the matcher holding the fewest subscriptions (then the lowest
                # id, so the choice does not depend on how words happen to be numbered).
                # They are the rule, not the exception: a subscription whose words every
                # eligible matcher already holds adds no word anywhere (utility 0
                # everywhere), and with a million subscriptions nearly all are such. By
                # id alone they piled onto the lowest matchers, whose tries then cost each
                # post up to 4x the lookups of the others (tweet-based, N = 16, real
                # tweets: counted work 2.02x the mean on the busiest matcher, docs/RESULTS.md)
                b = eligible[best_j]
                if (
                    u > best_u
                    or (u == best_u and subscriptions_on[i] < subscriptions_on[b])
                    or (u == best_u and subscriptions_on[i] == subscriptions_on[b] and i < b)
                ):
                    best_u = u
                    best_j = j
            chosen_from, chosen_n = best_j, 1
        for j in range(chosen_from, chosen_from + chosen_n):
            i = eligible[j]
            if n_out == out.shape[0]:
                grown = np.empty(2 * out.shape[0], dtype=np.int32)
                grown[:n_out] = out[:n_out]
                out = grown
            out[n_out] = i
            n_out += 1
            subscriptions_on[i] += 1
            old_cost = slope * unique[i] + intercept
            for w in words:
                if word_count[i, w] == 0:
                    unique[i] += 1
                word_count[i, w] += 1
            new_cost = slope * unique[i] + intercept
            cost_sum += new_cost - old_cost
            cost_sq += new_cost * new_cost - old_cost * old_cost
        out_indptr[s + 1] = n_out
    return out_indptr, out[:n_out].copy()


@njit(cache=True)
def account(
    sub_indptr: np.ndarray,
    sub_words: np.ndarray,
    place_indptr: np.ndarray,
    place_matchers: np.ndarray,
    word_count: np.ndarray,
    unique: np.ndarray,
    subscriptions_on: np.ndarray,
    sign: int,
) -> None:
    """Add (``sign`` = 1) or remove (-1) placed subscriptions from the matchers' contents."""
    for s in range(sub_indptr.shape[0] - 1):
        for j in range(place_indptr[s], place_indptr[s + 1]):
            i = place_matchers[j]
            subscriptions_on[i] += sign
            for e in range(sub_indptr[s], sub_indptr[s + 1]):
                w = sub_words[e]
                before = word_count[i, w]
                word_count[i, w] = before + sign
                if before == 0:
                    unique[i] += 1
                elif before + sign == 0:
                    unique[i] -= 1


@njit(cache=True)
def covering(
    sub_indptr: np.ndarray,
    sub_words: np.ndarray,
    place_indptr: np.ndarray,
    place_matchers: np.ndarray,
    part_start: np.ndarray,
    part_count: np.ndarray,
    part_matchers: np.ndarray,
    n_matchers: int,
) -> np.ndarray:
    """Per subscription: does every post containing it reach one of its matchers?

    True when a placed matcher owns an unsplit word of it, or the placed matchers hold
    every version of one of its words.
    """
    n_subs = sub_indptr.shape[0] - 1
    out = np.zeros(n_subs, dtype=np.bool_)
    on = np.zeros(n_matchers, dtype=np.bool_)
    for s in range(n_subs):
        for j in range(place_indptr[s], place_indptr[s + 1]):
            on[place_matchers[j]] = True
        for e in range(sub_indptr[s], sub_indptr[s + 1]):
            w = sub_words[e]
            every = True
            for k in range(part_count[w]):
                if not on[part_matchers[part_start[w] + k]]:
                    every = False
                    break
            if every:
                out[s] = True
                break
        for j in range(place_indptr[s], place_indptr[s + 1]):
            on[place_matchers[j]] = False
    return out
