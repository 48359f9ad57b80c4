"""Corpora: CSR arrays, file readers and synthetic generators."""

from core.corpus.arrays import Corpus, corpus_from_arrays, corpus_from_word_lists, holdout_mask

__all__ = ["Corpus", "corpus_from_arrays", "corpus_from_word_lists", "holdout_mask"]
