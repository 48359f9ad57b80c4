"""Normalisation of posts and subscriptions (paper 001, Sect. 6.1; DESIGN.md section 6).

One function serves posts and subscriptions, so a subscription matches exactly the posts
that contain its words after the same treatment:

1. HTML entities are unescaped (tweets carry ``&amp;``) and the text is lower-cased;
2. whitespace-separated tokens that are URLs (``http...``, ``https...``, ``www.``) or
   ``@screen-names`` are dropped whole;
3. word tokens are runs of Unicode letters and digits, optionally joined by apostrophes
   (``don't``); punctuation, emoji and other symbols separate or vanish; numbers are kept;
4. English stop words are removed: Spark ML's default English list
   (``StopWordsRemover.loadDefaultStopWords("english")``, shipped here as
   ``stopwords_english.txt``; a test keeps the two equal);
5. remaining apostrophes are removed and each word is reduced by the original Porter
   stemmer (PyStemmer's ``porter`` algorithm).

The result is a *set* of words, returned sorted for determinism.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources

import Stemmer

from core.errors import InvalidArgumentError

_STOP_WORDS_FILE = "stopwords_english.txt"


def _load_stop_words() -> frozenset[str]:
    text = resources.files("core.text").joinpath(_STOP_WORDS_FILE).read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


ENGLISH_STOP_WORDS: frozenset[str] = _load_stop_words()

# Tokens dropped whole before word extraction.
_URL_OR_NAME = re.compile(r"^(?:https?\S*|www\.\S*|@\S*)$")
# A word: letters/digits (Unicode aware, no underscore), apostrophe-joined parts allowed.
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

_stemmer = Stemmer.Stemmer("porter")


@lru_cache(maxsize=1 << 18)
def _stem(word: str) -> str:
    # Caching pays off: word frequencies are Zipfian, most tokens are repeats.
    return str(_stemmer.stemWord(word))


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lower-case word tokens, before stop-word removal and stemming.

    Args:
        text: a post or subscription.

    Returns:
        The word tokens in order, URLs and @names removed, apostrophes kept.

    Raises:
        InvalidArgumentError: if ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise InvalidArgumentError(f"text must be str, got {type(text).__name__}")
    lowered = html.unescape(text).lower().translate(_APOSTROPHES)
    tokens: list[str] = []
    for chunk in lowered.split():
        if _URL_OR_NAME.match(chunk):
            continue
        tokens.extend(_WORD.findall(chunk))
    return tokens


def normalize(text: str) -> list[str]:
    """Normalise a post or a subscription into its sorted set of words.

    Args:
        text: the raw text.

    Returns:
        Distinct normalised words, sorted.

    Raises:
        InvalidArgumentError: if ``text`` is not a ``str``.

    Example:
        >>> normalize("Running to the White House!! http://t.co/x @user #news")
        ['hous', 'new', 'run', 'white']
    """
    words: set[str] = set()
    for token in tokenize(text):
        if token in ENGLISH_STOP_WORDS:
            continue
        word = token.replace("'", "")
        if word in ENGLISH_STOP_WORDS:  # e.g. "it's" written "its"
            continue
        words.add(_stem(word))
    return sorted(words)


def normalize_many(texts: Iterable[str]) -> list[list[str]]:
    """Normalise many texts; see :func:`normalize`."""
    return [normalize(text) for text in texts]
