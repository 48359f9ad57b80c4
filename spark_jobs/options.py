"""A Spark job's command line, derived from its config dataclass: each field is an option
(``max_moved``: ``--max-moved``), and its type, default and the string under it (its help)
are the option's. tyro parses the command line into the config, beside the options every
job takes (:class:`SessionOptions`): nothing below the command line sees an ``argparse``
object, and no option is declared apart from its field.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, overload

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

ConfigT = TypeVar("ConfigT")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SessionOptions:
    """Where a job runs: the options of its session, not of the job."""

    lakehouse: str | None = None
    """lakehouse root (default: $S3TM_LAKEHOUSE or ./lakehouse)"""
    master: str | None = None
    """Spark master (default: local[*] or $S3TM_SPARK_MASTER)"""


_JOB_OPTIONS: dict[object, type] = {}


def job_options(config_type: object) -> type:
    """The dataclass of a job's whole command line: the fields of ``config_type`` and of
    :class:`SessionOptions`, both at the top level (``--nodes``, not ``--config.nodes``).
    A union of dataclasses, each ``Annotated`` with ``tyro.conf.subcommand(name)``, is a
    job with actions (``stream run|status``)."""
    import tyro

    if config_type in _JOB_OPTIONS:
        return _JOB_OPTIONS[config_type]
    flat = tyro.conf.arg(name="")
    made = _JOB_OPTIONS[config_type] = dataclasses.make_dataclass(
        f"{getattr(config_type, '__name__', 'Command')}Options",
        [
            ("config", Annotated[config_type, flat]),
            ("session", Annotated[SessionOptions, flat]),
        ],
        frozen=True,
    )
    return made


@overload
def parse_job(
    config_type: type[ConfigT], argv: Sequence[str] | None, *, prog: str, description: str
) -> tuple[ConfigT, SessionOptions]: ...


@overload
def parse_job(
    config_type: object, argv: Sequence[str] | None, *, prog: str, description: str
) -> tuple[object, SessionOptions]: ...


def parse_job(
    config_type: object, argv: Sequence[str] | None, *, prog: str, description: str
) -> tuple[object, SessionOptions]:
    """The job's config and session from ``argv`` (``--help`` prints both; a bad option
    exits 2, as argparse does; a config that refuses its values raises its error). An
    action's options and the session's may come in any order (``stream --lakehouse L run``
    or ``stream run --lakehouse L``)."""
    import tyro

    parsed: Any = tyro.cli(
        job_options(config_type),
        args=list(argv) if argv is not None else None,
        prog=prog,
        description=description,
        config=(tyro.conf.CascadeSubcommandArgs, tyro.conf.OmitSubcommandPrefixes),
    )
    return parsed.config, parsed.session


def config_from(config_type: type[ConfigT], source: DataclassInstance, **given: object) -> ConfigT:
    """A ``config_type`` from the options of ``source`` (a dataclass) that share a field's
    name (the same setting: seed, nodes, ...), with ``given`` (values converted from the
    options: parsed lists, paths) over them; the other fields keep their defaults."""
    names = {f.name for f in dataclasses.fields(config_type) if f.init}  # type: ignore[arg-type]
    shared = names & {f.name for f in dataclasses.fields(source)}
    unknown = set(given) - names
    if unknown:
        raise TypeError(f"{config_type.__name__} has no field {sorted(unknown)}")
    return config_type(**{name: getattr(source, name) for name in shared - set(given)}, **given)


@dataclasses.dataclass(frozen=True)
class Template:
    """A value Airflow renders when the task runs: a Jinja expression
    (``params.nodes``, ``ti.xcom_pull(...)['end']``), without the braces."""

    expression: str


def job_argv(config_type: type, **values: object) -> list[str]:
    """The command line that parses back into ``config_type`` with ``values``: each a
    field's value or a :class:`Template` of it (None: left out, the field's default). A
    bool is ``--flag`` or ``--no-flag`` (a template chooses one when rendered); a sequence
    is its items after the option. A name that is not a field raises ``TypeError``, so a
    DAG that names an option its job lacks fails when it is parsed."""
    fields = {f.name: f for f in dataclasses.fields(config_type) if f.init}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise TypeError(f"{config_type.__name__} has no option {unknown}")
    hints = typing.get_type_hints(config_type)
    argv: list[str] = []
    for name, value in values.items():
        if value is None:
            continue
        option = "--" + name.replace("_", "-")
        negated = "--no-" + name.replace("_", "-")
        if hints[name] is bool:
            if isinstance(value, Template):
                argv.append(f"{{{{ '{option}' if ({value.expression}) else '{negated}' }}}}")
            else:
                argv.append(option if value else negated)
        elif isinstance(value, Template):
            argv += [option, f"{{{{ {value.expression} }}}}"]
        elif isinstance(value, list | tuple):
            argv += [option, *(str(item) for item in value)]
        else:
            argv += [option, value.isoformat() if hasattr(value, "isoformat") else str(value)]
    return argv
