"""The learning input: the word-to-post bipartite graph over *tokens*.

A token is a word, or one version of a split hot word. Learners map tokens to matchers and
never need to know whether splitting happened, which is how splitting "works with any
learner" (paper 001, Sect. 5.1).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError
from core.learn._split_kernels import split_post_tokens, split_word_posts
from core.learn.split import SplitPlan, deal_versions, plan_split
from core.routing.hashing import version_key


@dataclass(frozen=True, eq=False)
class LearningProblem:
    """CSR views of the token/post bipartite graph.

    Attributes:
        vocabulary: ``(n_words,)`` words.
        token_word: ``(n_tokens,)`` int32, the word of each token.
        token_part: ``(n_tokens,)`` int32, the version number (0 when not split).
        post_indptr, post_tokens: post -> tokens CSR (int64, int32; a row lists its tokens
            in the corpus row's word order).
        token_indptr, token_posts: token -> posts CSR (int64, int32).
        token_subscribed: ``(n_tokens,)`` bool, tokens whose word is subscribed.
        split_plan: the plan when splitting was asked for, else None.
    """

    vocabulary: np.ndarray
    token_word: np.ndarray
    token_part: np.ndarray
    post_indptr: np.ndarray
    post_tokens: np.ndarray
    token_indptr: np.ndarray
    token_posts: np.ndarray
    token_subscribed: np.ndarray
    split_plan: SplitPlan | None

    @property
    def n_posts(self) -> int:
        return int(self.post_indptr.shape[0] - 1)

    @property
    def n_tokens(self) -> int:
        return int(self.token_word.shape[0])

    @cached_property
    def token_frequencies(self) -> np.ndarray:
        """``(n_tokens,)`` int64: posts per token."""
        return np.diff(self.token_indptr)

    def token_keys(self) -> list[str]:
        """The routing key of every token (see :func:`core.routing.hashing.version_key`)."""
        words = self.vocabulary[self.token_word]
        return [version_key(w, int(p)) for w, p in zip(words, self.token_part, strict=True)]

    def learnable_tokens(self) -> np.ndarray:
        """Tokens a learner maps: subscribed and present in at least one post."""
        return np.flatnonzero(self.token_subscribed & (self.token_frequencies > 0))


def subscribed_mask(vocabulary: np.ndarray, subscribed_words: Collection[str] | None) -> np.ndarray:
    """Boolean mask of the vocabulary words that are subscribed (all when None)."""
    if subscribed_words is None:
        return np.ones(len(vocabulary), dtype=bool)
    wanted = set(subscribed_words)
    return np.fromiter((w in wanted for w in vocabulary), dtype=bool, count=len(vocabulary))


def build_problem(
    corpus: Corpus,
    n_matchers: int,
    *,
    subscribed_words: Collection[str] | None = None,
    split: bool = False,
    seed: int = 0,
    min_parts: Mapping[str, int] | None = None,
) -> LearningProblem:
    """Turn a corpus into the learning input, splitting hot words when asked.

    Args:
        corpus: the training posts.
        n_matchers: N (the split rule depends on it).
        subscribed_words: learn on these words only; None means every word is subscribed.
        split: apply hot-word splitting (Sect. 5.1) to the subscribed words.
        seed: seeds the dealing of a hot word's posts to its versions.
        min_parts: at least this many versions for these words (with ``split``): words
            the live stream sees hotter than the training posts do (a burst).

    Raises:
        InvalidArgumentError: if ``n_matchers`` < 1.
    """
    if n_matchers < 1:
        raise InvalidArgumentError(f"n_matchers must be >= 1, got {n_matchers}")
    word_subscribed = subscribed_mask(corpus.vocabulary, subscribed_words)
    word_indptr, word_posts = corpus.word_posts()
    n_words = corpus.n_words
    # f(w) from the transpose just built (a bincount of every edge again costs as much)
    word_frequencies = np.diff(word_indptr)
    plan = plan_split(word_frequencies, word_subscribed, n_matchers) if split else None
    if plan is not None and min_parts:
        word_id = {w: i for i, w in enumerate(corpus.vocabulary.tolist())}
        n_parts = plan.n_parts.copy()
        for word, parts in min_parts.items():
            i = word_id.get(word)
            if i is not None and word_subscribed[i] and word_frequencies[i] > 0:
                # never more versions than posts to deal to them
                n_parts[i] = max(n_parts[i], min(int(parts), int(word_frequencies[i])))
        plan = SplitPlan(plan.per_node_share, plan.cap, n_parts)
    if plan is None or plan.hot_words.size == 0:
        return LearningProblem(
            vocabulary=corpus.vocabulary,
            token_word=np.arange(n_words, dtype=np.int32),
            token_part=np.zeros(n_words, dtype=np.int32),
            post_indptr=corpus.indptr,
            post_tokens=corpus.indices,
            token_indptr=word_indptr,
            token_posts=word_posts,
            token_subscribed=word_subscribed,
            split_plan=plan,
        )
    n_parts = plan.n_parts
    token_base = np.zeros(n_words + 1, dtype=np.int64)
    np.cumsum(n_parts, out=token_base[1:])
    n_tokens = int(token_base[-1])
    token_word = np.repeat(np.arange(n_words, dtype=np.int32), n_parts)
    token_part = (np.arange(n_tokens, dtype=np.int64) - token_base[token_word]).astype(np.int32)
    versions = deal_versions(word_indptr, n_parts, seed)
    token_indptr, token_posts = split_word_posts(word_indptr, word_posts, n_parts, versions)
    # a post has as many tokens as words: the corpus' rows, hot words' edges patched
    post_indptr = corpus.indptr
    post_tokens = split_post_tokens(
        corpus.indptr, corpus.indices, token_base, word_indptr, word_posts, n_parts, versions
    )
    return LearningProblem(
        vocabulary=corpus.vocabulary,
        token_word=token_word,
        token_part=token_part,
        post_indptr=post_indptr,
        post_tokens=post_tokens,
        token_indptr=token_indptr,
        token_posts=token_posts,
        token_subscribed=word_subscribed[token_word],
        split_plan=plan,
    )
