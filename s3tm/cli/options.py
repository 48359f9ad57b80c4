"""A command's options declared once, as a frozen dataclass: each field's name is the
option (``batch_posts``: ``--batch-posts``), its type and default are the option's, and the
string under it is its help. tyro parses the command line into the dataclass; the handler
gets a typed config, never an ``argparse.Namespace``.

argparse still routes ``s3tm GROUP COMMAND`` (so ``s3tm bench --help`` lists the commands
with their help); what follows the command goes to tyro whole, ``--help`` included.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from core.remap_options import HOLDOUT_FRACTION, HOLDOUT_SEED

Options = TypeVar("Options")


def add_command(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    options: type[Options],
    handler: Callable[[Options], int],
    *,
    prog: str,
) -> None:
    """Register ``name`` to parse into ``options`` and call ``handler`` with them; its help
    is the first paragraph of the options' docstring (the whole of it heads the command's
    own --help). ``prog``: the group as typed (``s3tm bench``)."""
    text = " ".join((options.__doc__ or "").split("\n\n")[0].split())
    parser = commands.add_parser(name, help=text, add_help=False, prefix_chars="\0")
    parser.add_argument(
        "options", nargs=argparse.REMAINDER, help=f"the options: {prog} {name} --help"
    )
    parser.set_defaults(
        handler=functools.partial(_run, options, handler, f"{prog} {name}"), options_type=options
    )


def _run(
    options: type[Options], handler: Callable[[Options], int], prog: str, args: argparse.Namespace
) -> int:
    import tyro

    parsed: Any = tyro.cli(options, args=args.options, prog=prog)
    return handler(parsed)


# -- options several commands take -------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class OutOption:
    out: str = "docs/bench"
    """directory for the CSV (and PNG, if any)"""


@dataclass(frozen=True, kw_only=True)
class CompareOptions:
    compare: str | None = None
    """also run it at git revision REV (a worktree), alternating runs, and print the ratio"""
    runs: int = 3
    """runs per side with --compare"""


@dataclass(frozen=True, kw_only=True)
class CorpusOption:
    corpus: str | None = None
    """real corpus (default: ../shared/data tweets if present)"""


@dataclass(frozen=True, kw_only=True)
class HoldoutOptions:
    holdout_fraction: float = HOLDOUT_FRACTION
    """posts kept out of learning to evaluate on (0 = learn on all)"""
    split_seed: int = HOLDOUT_SEED
    """seed of the hold-out split"""
