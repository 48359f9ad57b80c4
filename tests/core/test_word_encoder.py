"""The fast normaliser (``core.text.encoder``) against the reference ``normalize``."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus.records import ReadReport
from core.errors import InvalidArgumentError
from core.text import _tokenize_kernels as k
from core.text import encoder as encoder_module
from core.text import normalize
from core.text.encoder import WordEncoder, code_point_classes
from spark_jobs.lake.corpus_files import iter_raw_posts
from tests.hypothesis_tiers import examples


def words_of(encoder: WordEncoder, indptr: np.ndarray, ids: np.ndarray) -> list[list[str]]:
    vocabulary = encoder.words
    return [
        sorted(vocabulary[i] for i in ids[indptr[t] : indptr[t + 1]])
        for t in range(indptr.shape[0] - 1)
    ]


def assert_exact(encoder: WordEncoder, texts: list[str]) -> None:
    indptr, ids = encoder.encode(pa.array(texts, pa.string()))
    assert ids.dtype == np.int32 and indptr.shape == (len(texts) + 1,)
    for t, text in enumerate(texts):  # distinct within a text
        row = ids[indptr[t] : indptr[t + 1]]
        assert np.unique(row).shape == row.shape, text
    got = words_of(encoder, indptr, ids)
    for text, words in zip(texts, got, strict=True):
        assert words == normalize(text), repr(text)


# Fragments that exercise every rule of normalize(): case, URLs and @names after white
# space only, apostrophes (typographic too) inside words only, the three entities the
# kernel reads and others it leaves to the reference, Unicode white space, letters lower()
# changes (or changes in length), combining marks, emoji, underscores, digits.
FRAGMENTS = [
    "Running",
    "the",
    "WHITE",
    "house",
    "don't",
    "it's",
    "Obama\u2019s",
    "\u2018quoted\u2019",
    "rock\u02bcn",
    "'",
    "''",
    "a'",
    "'b",
    "x'y'z",
    "http://t.co/x",
    "HTTPS://A.B",
    "www.x.org",
    "wwwx",
    "@user",
    "@",
    "e@mail",
    "#tag",
    "#http",
    "&amp;",
    "&lt;",
    "&gt;",
    "&amp",
    "&nbsp;",
    "&#39;",
    "&quot;",
    "&",
    "&amp;amp;",
    "caf\u00e9",
    "CAF\u00c9",
    "\u0130stanbul",
    "\u03a3\u039f\u03a3",
    "stra\u00dfe",
    "\u212a",
    "e\u0301",
    "\U0001f525",
    "\u2026",
    "_",
    "snake_case",
    "3-1",
    "2013",
    "\u00bd",
    "\u0663",
    "\ufb01",
    " ",
    "  ",
    "\t",
    "\n",
    "\u00a0",
    "\u3000",
    "\x1c",
    "\u200b",
    "\u200d",
    "!",
    ".",
    ",",
    "-",
    "\ud55c\uad6d\uc5b4",
    "\u0645\u0631\u062d\u0628\u0627",
    "I",
    "Z",
    "a",
    "z",
    "0",
    "connection",
    "connected",
]
texts_strategy = st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join) | st.text(
    max_size=40
)


@settings(max_examples=examples(150), deadline=None)
@given(batch=st.lists(texts_strategy, min_size=1, max_size=12))
def test_growing_vocabulary_gives_exactly_the_reference_words(batch: list[str]) -> None:
    assert_exact(SHARED, batch)  # one encoder across examples: its table keeps growing


SHARED = WordEncoder(grow=True)


@settings(max_examples=examples(100), deadline=None)
@given(batch=st.lists(texts_strategy, min_size=1, max_size=12))
def test_fixed_vocabulary_keeps_only_its_words(batch: list[str]) -> None:
    vocabulary = ["hous", "white", "run", "don't", "obama", "caf\u00e9", "2013", "x", "b"]
    encoder = WordEncoder(vocabulary)
    indptr, ids = encoder.encode(batch)
    for t, text in enumerate(batch):
        expected = {vocabulary.index(w) for w in normalize(text) if w in vocabulary}
        assert set(ids[indptr[t] : indptr[t + 1]].tolist()) == expected
    assert encoder.n_words == len(vocabulary)


def test_examples_and_repeat_calls() -> None:
    encoder = WordEncoder(grow=True)
    texts = [
        "Running to the White House!! http://t.co/x @user #news",
        "a @user b c d",  # a skipped token after an unknown one
        "Obama's policies &amp; politics &nbsp;here",
        "",
        "\U0001f525\U0001f525",
    ]
    known = []
    for _ in range(3):  # cold, then every token known
        assert_exact(encoder, texts)
        known.append((encoder.n_words, encoder.n_tokens))
    # the first call learnt every word and token: the repeats learn none
    assert known == [known[0]] * 3
    assert set(encoder.words) >= set().union(*map(normalize, texts))


def _read_texts(path: Path, limit: int) -> list[str]:
    records = iter_raw_posts(path, ReadReport(path=str(path)))
    return [post.text for post in itertools.islice(records, limit)]


@pytest.mark.parametrize("name", ["tweets-tweeteval.jsonl.gz", "tweets-ira-timed.jsonl.gz"])
def test_real_tweets_give_exactly_the_reference_words(real_corpus: Path, name: str) -> None:
    path = real_corpus.parent / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    texts = _read_texts(path, 60_000)
    encoder = WordEncoder(grow=True)
    for start in range(0, len(texts), 20_000):  # batches, as a stream meets them
        assert_exact(encoder, texts[start : start + 20_000])


def test_a_full_table_starts_again_and_stays_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encoder_module, "MAX_TOKENS", 8)
    encoder = WordEncoder(grow=True)
    texts = [f"word{i} other{i} third{i % 3} & more{i}" for i in range(40)]
    assert_exact(encoder, texts)
    assert_exact(encoder, texts)
    assert encoder.n_tokens <= 8 + 40 * 4


def test_a_grown_vocabulary_finds_tokens_that_led_nowhere() -> None:
    encoder = WordEncoder(["white"])
    indptr, ids = encoder.encode(["white house", "houses"])
    assert ids.tolist() == [0]
    encoder.extend(["white", "hous"])
    indptr, ids = encoder.encode(["white house", "houses"])
    assert indptr.tolist() == [0, 2, 3] and sorted(ids[:2].tolist()) == [0, 1]
    assert ids[2] == 1
    with pytest.raises(InvalidArgumentError, match="prefix"):
        encoder.extend(["black", "white", "hous"])


def test_a_grown_vocabulary_repoints_the_tokens_it_knew_without_normalising_them_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoder = WordEncoder(["white"])
    texts = ["white house", "houses of the white", "the houses"]
    encoder.encode(texts)
    known = encoder.n_tokens
    normalised: list[str] = []
    from core.text.normalize import normalize_tokens as original

    def counting(tokens):  # type: ignore[no-untyped-def]
        normalised.extend(tokens)
        return original(tokens)

    monkeypatch.setattr(encoder_module, "normalize_tokens", counting)
    encoder.extend(["white", "hous"])
    indptr, ids = encoder.encode(texts)
    assert normalised == [] and encoder.n_tokens == known  # re-pointed, not relearnt
    got = [sorted(encoder.words[i] for i in ids[indptr[t] : indptr[t + 1]]) for t in range(3)]
    assert got == [["hous", "white"], ["hous", "white"], ["hous"]]


@settings(max_examples=examples(60), deadline=None)
@given(
    first=st.lists(texts_strategy, min_size=1, max_size=8),
    then=st.lists(texts_strategy, min_size=1, max_size=8),
    keep=st.integers(0, 10),
    limit=st.sampled_from([3, 1 << 22]),
)
def test_a_vocabulary_grown_between_batches_encodes_as_a_fresh_encoder_does(
    first: list[str], then: list[str], keep: int, limit: int
) -> None:
    """Texts, then a grown vocabulary (each of its words possibly met before as a token's
    word the vocabulary lacked), then texts again: exactly what an encoder made with the
    grown vocabulary gives (also when the unknown words' codes start again: ``limit``)."""
    words = sorted({w for t in first + then for w in normalize(t)})
    old, gained = words[::2][:keep], words[1::2]
    encoder = WordEncoder(old)
    old_limit = encoder_module.MAX_UNKNOWN_WORDS
    encoder_module.MAX_UNKNOWN_WORDS = limit
    try:
        encoder.encode(pa.array(first, pa.string()))
        encoder.extend([*old, *gained])
        fresh = WordEncoder([*old, *gained])
        for texts in (first, then):
            a, b = encoder.encode(pa.array(texts, pa.string())), fresh.encode(texts)
            assert words_of(encoder, *a) == words_of(fresh, *b)
    finally:
        encoder_module.MAX_UNKNOWN_WORDS = old_limit


def test_sliced_chunked_and_large_string_arrays() -> None:
    texts = ["alpha beta", "Gamma's delta", "epsilon", "zeta eta"]
    expected = [normalize(t) for t in texts]
    for array in (
        pa.array(["x", *texts], pa.string()).slice(1),
        pa.chunked_array([texts[:2], texts[2:]], pa.string()),
        pa.array(texts, pa.large_string()),
    ):
        encoder = WordEncoder(grow=True)
        assert words_of(encoder, *encoder.encode(array)) == expected


def test_bad_input_is_refused() -> None:
    encoder = WordEncoder(grow=True)
    with pytest.raises(InvalidArgumentError, match="null"):
        encoder.encode(pa.array(["a", None], pa.string()))
    with pytest.raises(InvalidArgumentError, match="string"):
        encoder.encode(pa.array([1, 2]))
    with pytest.raises(InvalidArgumentError, match="str"):
        encoder.encode(["a", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="twice"):
        WordEncoder(["a", "a"])
    assert encoder.encode([])[0].tolist() == [0]


def test_code_point_classes_agree_with_the_reference_expressions() -> None:
    classes = code_point_classes()
    word, space = re.compile(r"[^\W_]"), re.compile(r"\s")
    for cp in [*range(0x250), 0x2019, 0x02BC, 0x3000, 0x1F525, 0x130, 0x212A, 0x0301]:
        ch = chr(cp)
        c = classes[cp]
        if ch in "'\u2019\u2018\u02bc":
            assert c == k.APOSTROPHE
        elif ch == "&" or (ch.lower() != ch and not "A" <= ch <= "Z"):
            assert c == k.FALLBACK, hex(cp)
        elif space.match(ch):
            assert c == k.SPACE, hex(cp)
        elif word.match(ch):
            assert c in (k.WORD, k.UPPER_ASCII), hex(cp)
        else:
            assert c == k.SEPARATOR, hex(cp)


@settings(max_examples=examples(100), deadline=None)
@given(batch=st.lists(texts_strategy, max_size=12))
def test_normalize_arrow_is_normalize_per_text(batch: list[str]) -> None:
    from core.text import normalize_arrow

    words = normalize_arrow(pa.array(batch, pa.string()))
    assert words.type == pa.list_(pa.string())
    assert words.to_pylist() == [normalize(t) for t in batch]


AMPERSAND_PIECES = ["&", " ", "<", ";", "\t", "\r", "\x0b", "\x0c", "\n", "a", "amp;", "lt;"]
AMPERSAND_PIECES += ["not", "#", "#1", "1", "A", "@", "http"]


@settings(max_examples=examples(200), deadline=None)
@given(batch=st.lists(st.lists(st.sampled_from(AMPERSAND_PIECES), max_size=10).map("".join)))
def test_a_lone_ampersand_is_read_as_html_unescape_leaves_it(batch: list[str]) -> None:
    # the kernel reads "&" before white space, "<", "&", ";" or the end itself; any other
    # "&" (an entity html.unescape may rewrite) goes to the reference path
    assert_exact(WordEncoder(grow=True), batch)


def test_the_code_point_table_comes_from_the_source_given_and_is_checked(monkeypatch) -> None:
    """A layer above may provide the table (spark_jobs keeps it on disk); what it gives is
    used as it is, and a table of another shape is refused, not used."""
    fresh = encoder_module.classify_code_points()
    given = fresh.copy()
    try:
        encoder_module.use_code_point_classes(lambda: given)
        assert code_point_classes() is given
        encoder_module.use_code_point_classes(lambda: fresh[:100])
        with pytest.raises(InvalidArgumentError, match="code-point table"):
            code_point_classes()
    finally:
        encoder_module.use_code_point_classes(None)
    assert np.array_equal(code_point_classes(), fresh)
