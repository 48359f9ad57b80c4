"""Docstrings as ``--help`` text: the reStructuredText markup of the docstrings (double
backquotes, roles such as ``:func:``) becomes plain words with single backquotes."""

from __future__ import annotations

import re


def plain(text: str | None) -> str | None:
    """``text`` without reStructuredText markup (None stays None)."""
    if text is None:
        return None
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")
