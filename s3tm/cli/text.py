"""Docstrings as ``--help`` text: the reStructuredText markup of the docstrings (double
backquotes, roles such as ``:func:``) becomes plain words with single backquotes."""

from __future__ import annotations

import re

from core.errors import InvalidArgumentError


def plain(text: str | None) -> str | None:
    """``text`` without reStructuredText markup (None stays None)."""
    if text is None:
        return None
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def parse_int_list(text: str, name: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as err:
        raise InvalidArgumentError(f"{name} must be comma-separated integers: {text!r}") from err
    if not values or min(values) < 1:
        raise InvalidArgumentError(f"{name} must list positive integers: {text!r}")
    return values
