"""Normalisation of posts and subscriptions (paper 001, Sect. 6.1).

One function serves posts and subscriptions, so a subscription matches exactly the posts
that contain its words after the same treatment:

1. HTML entities are unescaped (tweets carry ``&amp;``) and the text is lower-cased;
2. whitespace-separated tokens that are URLs (``http...``, ``https...``, ``www.``) or
   ``@screen-names`` are dropped whole;
3. word tokens are runs of Unicode letters and digits, optionally joined by apostrophes
   (``don't``); punctuation, emoji and other symbols separate or vanish; numbers are kept;
4. English stop words are removed: Spark ML's default English list
   (``StopWordsRemover.loadDefaultStopWords("english")``, written out in
   ``core/text/stop_words.py``; a test keeps the two equal);
5. remaining apostrophes are removed and each word is reduced by the original Porter
   stemmer (PyStemmer's ``porter`` algorithm).

The result is a *set* of words, returned sorted for determinism.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

import Stemmer

from core.errors import InvalidArgumentError
from core.text.stop_words import ENGLISH_STOP_WORDS

# One pass finds word tokens and skips whole URL / @name tokens: the first alternative
# consumes a whitespace-delimited token starting with http, www. or @ (and yields an empty
# group), the second is a word: letters/digits (Unicode aware, no underscore), apostrophe-
# joined parts allowed. Same result as splitting on whitespace and testing each token.
_TOKEN = re.compile(r"(?<!\S)(?:http|www\.|@)\S*|([^\W_]+(?:'[^\W_]+)*)")
_CURLY_APOSTROPHES = ("\u2019", "\u2018", "\u02bc")

_stemmer = Stemmer.Stemmer("porter")
_MAX_CACHED_TOKENS = 1 << 20


def _lowered(text: str) -> str:
    if "&" in text:
        text = html.unescape(text)
    lowered = text.lower()
    if lowered.isascii():
        return lowered
    # Only non-ASCII text can hold typographic apostrophes; ``in`` scans are much
    # cheaper than translate() with a mapping.
    for curly in _CURLY_APOSTROPHES:
        if curly in lowered:
            lowered = lowered.replace(curly, "'")
    return lowered


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
    return [token for token in _TOKEN.findall(_lowered(text)) if token]


def word_tokens(text: str) -> list[str]:
    """Like :func:`tokenize` for a known ``str``, faster: skipped URL / @name tokens come
    back as empty strings (hot path of the streaming matcher)."""
    return _TOKEN.findall(_lowered(text))


def normalize_token(token: str) -> str | None:
    """The normalised word of one token from :func:`tokenize`, or None for a stop word."""
    if token in ENGLISH_STOP_WORDS:
        return None
    word = token.replace("'", "")
    if word in ENGLISH_STOP_WORDS:  # e.g. "it's" written "its"
        return None
    return str(_stemmer.stemWord(word))


def normalize_tokens(tokens: list[str]) -> list[str | None]:
    """:func:`normalize_token` of many tokens (one stemmer call for all of them)."""
    stop = ENGLISH_STOP_WORDS
    words: list[str | None] = []
    to_stem: list[str] = []
    for token in tokens:
        word = None if token in stop else token.replace("'", "")
        if word in stop:  # e.g. "it's" written "its"
            word = None
        words.append(word)
        if word is not None:
            to_stem.append(word)
    stems = iter(_stemmer.stemWords(to_stem))
    return [None if word is None else str(next(stems)) for word in words]


# token -> normalised word (None: stop word or URL/@name). Word frequencies are Zipfian, so
# almost every token is a repeat; caching skips the stop-word tests and the stemmer.
_WORD_OF_TOKEN: dict[str, str | None] = {"": None}


def clear_token_cache() -> None:
    """Forget every token's normalised word (benchmarks measure a cold start with it)."""
    _WORD_OF_TOKEN.clear()
    _WORD_OF_TOKEN[""] = None


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
    if not isinstance(text, str):
        raise InvalidArgumentError(f"text must be str, got {type(text).__name__}")
    cache = _WORD_OF_TOKEN
    words: set[str | None] = set()
    for token in _TOKEN.findall(_lowered(text)):
        word = cache.get(token, "")
        if word == "":
            if len(cache) > _MAX_CACHED_TOKENS:
                cache.clear()
                cache[""] = None
            word = cache[token] = normalize_token(token)
        words.add(word)
    words.discard(None)
    return sorted(words)  # type: ignore[arg-type]


def normalize_many(texts: Iterable[str]) -> list[list[str]]:
    """Normalise many texts; see :func:`normalize`."""
    return [normalize(text) for text in texts]
