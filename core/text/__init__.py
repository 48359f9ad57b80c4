"""Text normalisation shared by posts and subscriptions."""

from core.text.normalize import ENGLISH_STOP_WORDS, normalize, normalize_many, tokenize

__all__ = ["ENGLISH_STOP_WORDS", "normalize", "normalize_many", "tokenize"]
