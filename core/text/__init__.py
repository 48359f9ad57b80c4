"""Text normalisation shared by posts and subscriptions."""

from core.text.encoder import WordEncoder, normalize_arrow
from core.text.normalize import normalize, normalize_many, tokenize
from core.text.stop_words import ENGLISH_STOP_WORDS

__all__ = [
    "ENGLISH_STOP_WORDS",
    "WordEncoder",
    "normalize",
    "normalize_arrow",
    "normalize_many",
    "tokenize",
]
