from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidArgumentError
from core.text import ENGLISH_STOP_WORDS, normalize, tokenize
from tests.hypothesis_tiers import examples


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Running to the White House!! http://t.co/x @user #news", ["hous", "new", "run", "white"]),
        ("white house", ["hous", "white"]),
        ("The WHITE   house,", ["hous", "white"]),
        ("I don't like it", ["like"]),  # contraction is a stop word
        ("Obama's policies &amp; politics", ["obama", "polici", "polit"]),
        ("won 3-1 in 2013", ["1", "2013", "3", "won"]),  # numbers kept
        ("https://example.com/a?b=c www.example.com @someone", []),
        ("🔥🔥 !!! ... ???", []),  # symbols are not words
        ("café CAFÉ", ["café"]),  # Unicode letters kept
        ("snake_case", ["case", "snake"]),  # underscore separates
        ("connected connecting connection", ["connect"]),  # Porter stemming
        ("", []),
    ],
)
def test_normalize_examples(text: str, expected: list[str]) -> None:
    assert normalize(text) == expected


def test_normalize_returns_a_sorted_set() -> None:
    words = normalize("zebra apple zebra Apple mango")
    assert words == sorted(set(words)) == ["appl", "mango", "zebra"]


def test_post_and_subscription_share_the_function() -> None:
    post = "Watching the Presidential debates tonight at the White House"
    subscription = "white houses"
    assert set(normalize(subscription)) <= set(normalize(post))


def test_tokenize_drops_urls_and_names_but_keeps_apostrophes() -> None:
    assert tokenize("@bob it's http://x.y HTTPS://Z Nice!") == ["it's", "nice"]


def test_curly_apostrophe_is_an_apostrophe() -> None:
    assert normalize("don\u2019t stop") == normalize("don't stop") == ["stop"]


def test_stop_word_list_is_documented_and_nonempty() -> None:
    assert {"the", "and", "of", "don't", "i'm"} <= ENGLISH_STOP_WORDS
    assert len(ENGLISH_STOP_WORDS) == len(set(ENGLISH_STOP_WORDS)) > 100


def test_stop_words_equal_spark_ml_default_english(spark: object) -> None:
    from pyspark.ml.feature import StopWordsRemover

    assert frozenset(StopWordsRemover.loadDefaultStopWords("english")) == ENGLISH_STOP_WORDS


@pytest.mark.parametrize("bad", [None, 3, b"bytes", ["a"]])
def test_normalize_rejects_non_strings(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="text must be str"):
        normalize(bad)  # type: ignore[arg-type]


# The rules written the plain way (split on whitespace, drop URL/@name tokens, find words
# in each, stop words, stem): the one-pass, cached normaliser must agree on every text.
def _reference_normalize(text: str) -> list[str]:
    import html
    import re

    import Stemmer

    stemmer = Stemmer.Stemmer("porter")
    lowered = html.unescape(text).lower()
    for curly in ("\u2019", "\u2018", "\u02bc"):
        lowered = lowered.replace(curly, "'")
    words = set()
    for chunk in lowered.split():
        if re.match(r"^(?:https?\S*|www\.\S*|@\S*)$", chunk):
            continue
        for token in re.findall(r"[^\W_]+(?:'[^\W_]+)*", chunk):
            if token in ENGLISH_STOP_WORDS:
                continue
            word = token.replace("'", "")
            if word not in ENGLISH_STOP_WORDS:
                words.add(stemmer.stemWord(word))
    return sorted(words)


_PIECES = st.sampled_from(
    [
        "http://t.co/x",
        "https",
        "www.a.b",
        "wwwx",
        "@bob",
        "a@b",
        "x@",
        "#tag",
        "it's",
        "don\u2019t",
        "I'M",
        "&amp;",
        "&lt;b&gt;",
        "caf\u00e9",
        "snake_case",
        "3-1",
        "\u00a0",
        "\t",
        "\n",
        " ",
        "!!",
        "running",
        "HOUSE",
        "\u2018quoted\u2019",
        "'",
        "''a",
        "ok.",
        "\u0130stanbul",
        "\u00df",
        "x\u02bcs",
        "\u3000",
        "\u2028",
        "\x1c",
    ]
)


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=12))
def test_normalize_equals_the_plain_reference(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert normalize(text) == _reference_normalize(text)
    assert normalize(text) == normalize(text)  # the cache gives the same answer again


def test_normalize_equals_the_reference_on_real_tweets(real_corpus: Path) -> None:
    import gzip
    import json

    with gzip.open(real_corpus, "rt", encoding="utf-8") as lines:
        texts = [json.loads(line)["text"] for _, line in zip(range(20_000), lines, strict=False)]
    assert [normalize(t) for t in texts] == [_reference_normalize(t) for t in texts]


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(
        st.sampled_from(["it's", "its", "the", "running", "don't", "caf\u00e9", "a'b"])
        | st.text(max_size=8),
        max_size=20,
    )
)
def test_normalize_tokens_equals_one_token_at_a_time(tokens: list[str]) -> None:
    from core.text.normalize import normalize_token, normalize_tokens

    assert normalize_tokens(tokens) == [normalize_token(t) for t in tokens]
