"""Matchers: the trie of paper 001 (Sect. 4.1) and the counting baseline."""
