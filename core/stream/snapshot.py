"""What a worker needs to route and match a micro-batch with one routing version.

A :class:`MatcherSnapshot` travels to every worker in a Spark broadcast, so it holds what
every task needs and nothing that grows with all the subscriptions: the dictionary of
subscription words, each word's version matchers (hash fall-back already filled in), the
words each matcher uses and the subscribers' names. A matcher's subscriptions are not in
it: a match task reads its own matcher's from a **base** written once per routing version
(one file per matcher, :class:`BaseStore`) and applies the snapshot's **changes** since
that base (subscriptions added and cancelled), so an executor holds only the matchers its
tasks run, and a subscription change ships as a change, not as every matcher again.

``epoch`` increases whenever the placed subscriptions change; ``base_epoch`` names the base
the changes are relative to, so workers can tell a stale cache from a current one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from core.corpus.arrays import take_rows
from core.errors import InvalidArgumentError
from core.placement.live import LivePlacement

# (owner, routing version, epoch): names one immutable snapshot.
SnapshotKey = tuple[str, int, int]

# Rewrite the base when the changes since it pass this share of its subscriptions: past
# that, every task applies (and every broadcast carries) more than a base is worth.
REBASE_FRACTION = 0.1
# ... but not for every handful of changes to a small placement.
REBASE_MIN_CHANGES = 1_000


@dataclass(frozen=True)
class MatcherSubs:
    """One matcher's subscriptions: ids, their words as CSR (dictionary ids, sorted), and
    each one's subscriber (a code into the snapshot's ``subscriber_names``)."""

    sub_ids: np.ndarray  # int64
    indptr: np.ndarray  # int64
    word_ids: np.ndarray  # int32
    subscriber_codes: np.ndarray  # int32

    @classmethod
    def empty(cls) -> MatcherSubs:
        return cls(
            np.zeros(0, dtype=np.int64),
            np.zeros(1, dtype=np.int64),
            np.zeros(0, dtype=np.int32),
            np.zeros(0, dtype=np.int32),
        )

    def __len__(self) -> int:
        return int(self.sub_ids.shape[0])

    @property
    def nbytes(self) -> int:
        return int(
            self.sub_ids.nbytes
            + self.indptr.nbytes
            + self.word_ids.nbytes
            + self.subscriber_codes.nbytes
        )

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(sub_ids, indptr, word_ids)``: what the indexes are built from."""
        return self.sub_ids, self.indptr, self.word_ids

    def apply(self, changes: MatcherChanges) -> MatcherSubs:
        """These subscriptions without ``changes.removed``, then with ``changes.added``."""
        if not len(changes.added) and not changes.removed.size:
            return self
        keep = np.flatnonzero(~np.isin(self.sub_ids, changes.removed))
        indptr, words = take_rows(self.indptr, self.word_ids, keep)
        added = changes.added
        return MatcherSubs(
            np.concatenate([self.sub_ids[keep], added.sub_ids]),
            np.concatenate([indptr, indptr[-1] + added.indptr[1:]]),
            np.concatenate([words, added.word_ids]).astype(np.int32, copy=False),
            np.concatenate([self.subscriber_codes[keep], added.subscriber_codes]),
        )


@dataclass(frozen=True)
class MatcherChanges:
    """One matcher's subscriptions added and cancelled since the base."""

    added: MatcherSubs = field(default_factory=MatcherSubs.empty)
    removed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.added.nbytes + int(self.removed.nbytes)


class BaseStore(Protocol):
    """Where a snapshot's base lives: one :class:`MatcherSubs` per matcher at a location."""

    def write(self, location: str, matchers: Sequence[MatcherSubs]) -> None: ...

    def read(self, location: str, matcher: int) -> MatcherSubs: ...


class MemoryBases:
    """A :class:`BaseStore` in this process (tests, and a worker that is the driver)."""

    def __init__(self) -> None:
        self._bases: dict[str, list[MatcherSubs]] = {}
        self.reads = 0

    def write(self, location: str, matchers: Sequence[MatcherSubs]) -> None:
        self._bases[location] = list(matchers)

    def read(self, location: str, matcher: int) -> MatcherSubs:
        self.reads += 1
        try:
            return self._bases[location][matcher]
        except (KeyError, IndexError) as err:
            raise InvalidArgumentError(f"no base of matcher {matcher} at {location!r}") from err

    def remove(self, location: str) -> None:
        self._bases.pop(location, None)


@dataclass(frozen=True, eq=False)
class MatcherSnapshot:
    """One routing version's routing arrays at one epoch, and where its subscriptions are.

    Attributes:
        routing_version: the published version this snapshot routes with.
        epoch: the placed-subscription state's number (increases on every change).
        n_matchers: N.
        words: dictionary id -> word (the words of the placed subscriptions).
        part_start, part_count, part_matchers: per word id, the matchers of its versions.
        kept_words: ``(n_words, ceil(N / 8))`` uint8, bit ``m % 8`` of byte ``m // 8`` set
            for the words matcher m uses (its subscriptions' words and the words with a
            version on m): a post's other words are left out of its payload to m.
        subscriber_names: subscriber code -> name.
        base_location: where the base's per-matcher subscriptions are ("" : no base, every
            subscription is in ``changes``).
        base_epoch: the epoch the base was written at.
        changes: per matcher, the subscriptions added and cancelled since the base.
        seed: seeds the choice of a split word's version.
        slot_subscriptions: per version slot, the subscriptions on its matcher holding its
            word (load shedding's ``subscription`` utility and the yield prior).
    """

    routing_version: int
    epoch: int
    n_matchers: int
    words: list[str]
    part_start: np.ndarray
    part_count: np.ndarray
    part_matchers: np.ndarray
    kept_words: np.ndarray
    subscriber_names: list[str]
    base_location: str
    base_epoch: int
    changes: tuple[MatcherChanges, ...]
    seed: int = 0
    slot_subscriptions: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # Which stream made the snapshot: worker caches live as long as the Python workers, so
    # a second stream (or a restarted one) in the same Spark application, counting its own
    # versions and epochs from the start, must not find the first one's tries and words.
    owner: str = ""

    @property
    def key(self) -> SnapshotKey:
        return (self.owner, self.routing_version, self.epoch)

    @property
    def base_key(self) -> tuple[str, int, int]:
        return (self.owner, self.routing_version, self.base_epoch)

    @property
    def n_words(self) -> int:
        return len(self.words)

    @property
    def changes_nbytes(self) -> int:
        """The changes' bytes, each array once (the cancelled ids are one array that every
        matcher's changes share, and pickling ships it once)."""
        removed = {id(c.removed): int(c.removed.nbytes) for c in self.changes}
        return sum(c.added.nbytes for c in self.changes) + sum(removed.values())


def kept_words(placement: LivePlacement) -> np.ndarray:
    """The ``kept_words`` bitmap of :class:`MatcherSnapshot` for ``placement``."""
    n = placement.n_matchers
    n_words = len(placement.dictionary)
    used = placement.words_in_use()  # (N, n_words) bool
    kept = np.zeros((n_words, (n + 7) // 8), dtype=np.uint8)
    for matcher in range(n):
        kept[used[matcher], matcher >> 3] |= np.uint8(1 << (matcher & 7))
    part_start, part_count, part_matchers = placement.word_versions()
    counts = np.asarray(part_count[:n_words], dtype=np.int64)
    # every word's versions: its slice part_matchers[part_start[w] : + part_count[w]]
    first = np.cumsum(counts) - counts
    slots = np.repeat(np.asarray(part_start[:n_words], dtype=np.int64) - first, counts)
    slots += np.arange(int(counts.sum()), dtype=np.int64)
    version_word = np.repeat(np.arange(n_words, dtype=np.int64), counts)
    version_matcher = np.asarray(part_matchers, dtype=np.int64)[slots]
    np.bitwise_or.at(
        kept,
        (version_word, version_matcher >> 3),
        np.left_shift(1, version_matcher & 7).astype(np.uint8),
    )
    return kept


def group_by_matcher(
    n_matchers: int,
    sub_ids: np.ndarray,
    word_indptr: np.ndarray,
    word_ids: np.ndarray,
    matcher_indptr: np.ndarray,
    matchers: np.ndarray,
    codes: np.ndarray,
) -> list[MatcherSubs]:
    """Subscriptions (each with its matchers as CSR) -> per matcher, the ones placed there,
    in the order given."""
    bounds_of = np.asarray(matcher_indptr, dtype=np.int64)
    counts = bounds_of[1:] - bounds_of[:-1]
    pair_row = np.repeat(np.arange(sub_ids.shape[0], dtype=np.int64), counts)
    pair_matcher = np.asarray(matchers, dtype=np.int64)
    order = np.lexsort((pair_row, pair_matcher))
    pair_row, pair_matcher = pair_row[order], pair_matcher[order]
    bounds = np.searchsorted(pair_matcher, np.arange(n_matchers + 1))
    out = []
    for m in range(n_matchers):
        rows = pair_row[bounds[m] : bounds[m + 1]]
        indptr, words = take_rows(word_indptr, word_ids, rows)
        out.append(MatcherSubs(sub_ids[rows].copy(), indptr, words, codes[rows].copy()))
    return out


class SubscriberCodes:
    """Subscriber name <-> code, and each subscription's code, append-only (codes in a base
    stay valid while its changes are applied)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._code: dict[str, int] = {}
        self._of_sub = np.full(0, -1, dtype=np.int32)

    def assign(self, sub_ids: Sequence[int], subscribers: Sequence[str]) -> None:
        """Record each subscription's subscriber."""
        if len(sub_ids) != len(subscribers):
            raise InvalidArgumentError("one subscriber per subscription id is required")
        codes = np.empty(len(subscribers), dtype=np.int32)
        for i, name in enumerate(subscribers):
            code = self._code.get(name)
            if code is None:
                code = self._code[name] = len(self.names)
                self.names.append(name)
            codes[i] = code
        ids = np.asarray(sub_ids, dtype=np.int64)
        if ids.size and ids.min() < 0:
            raise InvalidArgumentError("subscription ids must not be negative")
        top = int(ids.max()) + 1 if ids.size else 0
        if top > self._of_sub.shape[0]:
            grown = np.full(max(top, 2 * self._of_sub.shape[0]), -1, dtype=np.int32)
            grown[: self._of_sub.shape[0]] = self._of_sub
            self._of_sub = grown
        self._of_sub[ids] = codes

    def of(self, sub_ids: np.ndarray) -> np.ndarray:
        """The code of each subscription.

        Raises:
            InvalidArgumentError: for a subscription with no subscriber recorded.
        """
        ids = np.asarray(sub_ids, dtype=np.int64)
        inside = (ids >= 0) & (ids < self._of_sub.shape[0])
        codes = np.full(ids.shape[0], -1, dtype=np.int32)
        codes[inside] = self._of_sub[ids[inside]]
        if (codes < 0).any():
            raise InvalidArgumentError(f"subscriptions {ids[codes < 0][:5]} have no subscriber")
        return codes


class SnapshotMaker:
    """Freezes a :class:`LivePlacement` into snapshots: a new base (written to ``bases``)
    when the routing version changes or the changes since the base pass
    :data:`REBASE_FRACTION` of it; the changes since the base otherwise.

    Tell it what changed with :meth:`added` and :meth:`removed` (placed / taken off).
    """

    def __init__(self, bases: BaseStore | None, base_root: str, *, owner: str = "") -> None:
        self.bases = bases
        self.base_root = base_root.rstrip("/")
        self.owner = owner
        self.codes = SubscriberCodes()
        self.base_location = ""
        self.base_epoch = -1
        self.base_count = 0
        self.base_nbytes = 0  # the subscription bytes of the current base, all matchers
        self.written: list[str] = []  # the base locations written, oldest first
        self._added: set[int] = set()
        self._removed: set[int] = set()

    def new_version(self) -> None:
        """A routing version was loaded: the next snapshot writes a base."""
        self.base_location = ""
        self.base_epoch = -1
        self._added.clear()
        self._removed.clear()
        self.codes = SubscriberCodes()

    def added(self, sub_ids: Sequence[int]) -> None:
        self._added.update(int(s) for s in sub_ids)

    def removed(self, sub_ids: Sequence[int]) -> None:
        for sub in sub_ids:
            sub = int(sub)
            if sub in self._added:
                self._added.discard(sub)
            else:
                self._removed.add(sub)

    def _due(self) -> bool:
        if self.bases is None:
            return False
        if not self.base_location:
            return True
        pending = len(self._added) + len(self._removed)
        return pending > max(REBASE_MIN_CHANGES, REBASE_FRACTION * self.base_count)

    def location(self, routing_version: int, epoch: int) -> str:
        return f"{self.base_root}/{self.owner or 'stream'}/v{routing_version}-e{epoch}"

    def freeze(
        self, placement: LivePlacement, routing_version: int, epoch: int, *, seed: int = 0
    ) -> MatcherSnapshot:
        """The snapshot of ``placement`` at ``epoch`` (writes a base when one is due)."""
        n = placement.n_matchers
        if self._due():
            assert self.bases is not None
            location = self.location(routing_version, epoch)
            sub_ids, word_indptr, words, matcher_indptr, matchers = placement.rows_of()
            per_matcher = group_by_matcher(
                n, sub_ids, word_indptr, words, matcher_indptr, matchers, self.codes.of(sub_ids)
            )
            self.bases.write(location, per_matcher)
            self.base_nbytes = sum(subs.nbytes for subs in per_matcher)
            self.written.append(location)
            self.base_location, self.base_epoch, self.base_count = location, epoch, len(sub_ids)
            self._added.clear()
            self._removed.clear()
        if self.base_location:
            added = np.array(sorted(self._added), dtype=np.int64)
            removed = np.array(sorted(self._removed), dtype=np.int64)
        else:  # no base store: every subscription is a change
            added, removed = placement.sub_ids, np.zeros(0, dtype=np.int64)
        return self._snapshot(placement, routing_version, epoch, added, removed, seed)

    def _snapshot(
        self,
        placement: LivePlacement,
        routing_version: int,
        epoch: int,
        added: np.ndarray,
        removed: np.ndarray,
        seed: int,
    ) -> MatcherSnapshot:
        n = placement.n_matchers
        sub_ids, word_indptr, words, matcher_indptr, matchers = placement.rows_of(added)
        adds = group_by_matcher(
            n, sub_ids, word_indptr, words, matcher_indptr, matchers, self.codes.of(sub_ids)
        )
        # a cancelled subscription is taken off every matcher: a task looks only at its own
        changes = tuple(MatcherChanges(adds[m], removed) for m in range(n))
        part_start, part_count, part_matchers = placement.word_versions()
        n_words = len(placement.dictionary)
        return MatcherSnapshot(
            routing_version=routing_version,
            epoch=epoch,
            n_matchers=n,
            words=[placement.dictionary.word(i) for i in range(n_words)],
            part_start=part_start,
            part_count=part_count,
            part_matchers=part_matchers,
            kept_words=kept_words(placement),
            subscriber_names=list(self.codes.names),
            base_location=self.base_location,
            base_epoch=self.base_epoch,
            changes=changes,
            seed=seed,
            slot_subscriptions=placement.slot_subscriptions(),
            owner=self.owner,
        )


def snapshot_of(
    placement: LivePlacement,
    routing_version: int,
    epoch: int,
    *,
    subscribers: dict[int, str] | None = None,
    seed: int = 0,
    owner: str = "",
) -> MatcherSnapshot:
    """Freeze ``placement`` with no base: every subscription is in the snapshot's changes
    (tests and one-process use; the stream writes bases with :class:`SnapshotMaker`).
    ``subscribers``: sub id -> subscriber (default: ``"sub-<id>"``)."""
    maker = SnapshotMaker(None, "", owner=owner)
    ids = placement.sub_ids
    given = subscribers or {}
    maker.codes.assign(ids.tolist(), [given.get(int(s), f"sub-{int(s)}") for s in ids])
    return maker.freeze(placement, routing_version, epoch, seed=seed)
