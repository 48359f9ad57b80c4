"""Word ids shared by the matchers of one routing version."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from core.errors import InvalidArgumentError


class WordDictionary:
    """Word <-> dense id. Subscriptions and posts are sorted by these ids, so the order the
    ids follow is the trie's word order: :meth:`by_rarity` puts rare words first, which
    keeps scoped traversals shallow (few posts reach a rare word's subtree)."""

    def __init__(self, words: Iterable[str] = ()) -> None:
        self._ids: dict[str, int] = {}
        self._words: list[str] = []
        for word in words:
            self.add(word)

    @classmethod
    def by_rarity(cls, words: Sequence[str], frequencies: Sequence[int]) -> WordDictionary:
        """Ids by ascending frequency (ties by word), so the rarest word gets id 0."""
        if len(words) != len(frequencies):
            raise InvalidArgumentError("words and frequencies must have equal length")
        order = sorted(range(len(words)), key=lambda i: (frequencies[i], words[i]))
        return cls(words[i] for i in order)

    def __len__(self) -> int:
        return len(self._words)

    def __contains__(self, word: object) -> bool:
        return word in self._ids

    def add(self, word: str) -> int:
        """The id of ``word``, assigning the next one when new."""
        if not isinstance(word, str) or not word:
            raise InvalidArgumentError(f"a word must be a non-empty str, got {word!r}")
        found = self._ids.get(word)
        if found is None:
            found = len(self._words)
            self._ids[word] = found
            self._words.append(word)
        return found

    def get(self, word: str) -> int:
        """The id of ``word`` or -1."""
        return self._ids.get(word, -1)

    def word(self, word_id: int) -> str:
        return self._words[word_id]

    def encode(self, words: Iterable[str], *, add: bool = False) -> np.ndarray:
        """Sorted distinct ids of ``words`` (unknown words dropped unless ``add``)."""
        ids = {self.add(w) if add else self.get(w) for w in words}
        ids.discard(-1)
        return np.array(sorted(ids), dtype=np.int32)

    def map_vocabulary(self, vocabulary: Sequence[str]) -> np.ndarray:
        """``(len(vocabulary),)`` int32: each vocabulary word's id here, or -1."""
        return np.fromiter(
            (self._ids.get(w, -1) for w in vocabulary), dtype=np.int32, count=len(vocabulary)
        )
