"""Text normalisation shared by posts and subscriptions."""

from core.text.encoder import WordEncoder, normalize_arrow
from core.text.normalize import ENGLISH_STOP_WORDS, normalize, normalize_many, tokenize

__all__ = [
    "ENGLISH_STOP_WORDS",
    "WordEncoder",
    "normalize",
    "normalize_arrow",
    "normalize_many",
    "tokenize",
]
