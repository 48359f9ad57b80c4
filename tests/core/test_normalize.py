from __future__ import annotations

import pytest

from core.errors import InvalidArgumentError
from core.text import ENGLISH_STOP_WORDS, normalize, tokenize


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


@pytest.mark.spark
def test_stop_words_equal_spark_ml_default_english(spark: object) -> None:
    from pyspark.ml.feature import StopWordsRemover

    assert frozenset(StopWordsRemover.loadDefaultStopWords("english")) == ENGLISH_STOP_WORDS


@pytest.mark.parametrize("bad", [None, 3, b"bytes", ["a"]])
def test_normalize_rejects_non_strings(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="text must be str"):
        normalize(bad)  # type: ignore[arg-type]
