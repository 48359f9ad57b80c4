"""``s3tm sql``: SQL over the lakehouse's Delta tables, each by its name.

Tables: every table the platform has written (``routing.versions``, ``routing.mappings``,
``routing.placements``, ``subscriptions.registry``, ``matches``, ``deliveries``,
``stream.batches``, ``bronze.posts``, ``silver.posts``, ``silver.posts_quarantine``,
``gold.word_stats``, ...), at its latest Delta version.

Time travel: ``--as-of TABLE=VERSION`` or ``--as-of TABLE=TIMESTAMP`` (ISO 8601, UTC unless
it says otherwise) reads that table as it was; repeat it for several tables. The versions
read are printed on stderr.

Engine: with a catalog configured (``S3TM_CATALOG_URI``: a Hive Metastore the Spark jobs
register their tables in), Spark SQL on it, so a query reads the tables by the names a
team's other tools use; time travel is then Delta's own ``VERSION AS OF n`` in the query.
Otherwise (``--engine duckdb`` forces it) DuckDB (its SQL dialect) over delta-rs' file
lists; no JVM starts. JSON columns
(``metrics``, ``validation``, ``params``) are read with ``get_json_object(col, '$.path')``,
as in Spark SQL. ``s3tm sql`` with no query reads statements from a prompt (end each with
``;``, ``\\q`` quits); ``--examples`` lists the documented queries, ``--example NAME`` runs one.

Examples:
  s3tm sql "SELECT routing_version, status FROM routing.versions ORDER BY 1"
  s3tm sql --as-of routing.versions=3 "SELECT count(*) FROM routing.versions"
  s3tm sql --format csv --example quarantine-by-day
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import sys
from typing import Any, TextIO

import pyarrow as pa

from s3tm.cli.text import plain

FORMATS = ("table", "csv", "json")
ENGINES = ("auto", "catalog", "duckdb")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "sql",
        help="SQL over the lakehouse's Delta tables (time travel with --as-of)",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("query", nargs="?", help="one SQL statement (none: an interactive prompt)")
    p.add_argument("--lakehouse", default=None, help="lakehouse root (default: ./lakehouse)")
    p.add_argument(
        "--as-of",
        action="append",
        default=[],
        metavar="TABLE=VERSION|TIMESTAMP",
        help="read TABLE at a Delta version or timestamp (repeatable)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="catalog: Spark SQL on S3TM_CATALOG_URI; duckdb: the lakehouse's files; "
        "auto (default): the catalog when one is configured",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output (default: table)")
    p.add_argument(
        "--max-rows", type=int, default=1000, help="rows printed as a table (default 1000)"
    )
    p.add_argument("--examples", action="store_true", help="list the documented example queries")
    p.add_argument("--example", metavar="NAME", help="run one documented example query")
    p.set_defaults(handler=_run)

    # its options are its config's fields (spark_jobs.options): tyro parses what follows
    p = sub.add_parser(
        "sql-server",
        help="[spark] a SQL endpoint (Spark Connect) over the lakehouse's tables",
        add_help=False,
        prefix_chars="\0",
    )
    p.add_argument("options", nargs=argparse.REMAINDER, help="the options: s3tm sql-server --help")
    p.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from spark_jobs.options import parse_job
    from spark_jobs.sql import server

    config, session = parse_job(
        server.ServerConfig,
        args.options,
        prog="s3tm sql-server",
        description=plain(server.__doc__) or "",
    )
    return server.run_server(config, session)


def _run(args: argparse.Namespace) -> int:
    from core.errors import InvalidArgumentError
    from s3tm.sql.catalog_engine import CatalogSQL
    from s3tm.sql.engine import LakehouseSQL, parse_as_of
    from s3tm.sql.examples import EXAMPLES, example
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.settings import settings

    if args.examples:
        for item in EXAMPLES:
            print(f"-- {item.name}: {item.question}\n{item.sql.strip()};\n")
        return 0
    if args.example and args.query:
        raise InvalidArgumentError("give a query or --example NAME, not both")
    if args.max_rows < 1:
        raise InvalidArgumentError("--max-rows must be at least 1")
    query = example(args.example).sql if args.example else args.query
    catalog = settings().catalog_uri
    if args.engine == "catalog" and not catalog:
        raise InvalidArgumentError(
            "--engine catalog: no catalog is configured (S3TM_CATALOG_URI=thrift://HOST:PORT)"
        )
    if catalog and args.engine != "duckdb":
        if args.as_of:
            raise InvalidArgumentError(
                "--as-of reads the lakehouse's files (--engine duckdb); on the catalog write "
                "Delta's time travel in the query: FROM routing.versions VERSION AS OF 3"
            )
        if args.lakehouse:
            raise InvalidArgumentError(
                f"--lakehouse: the catalog ({catalog}) says where each table is; "
                "--engine duckdb reads a lakehouse by its path"
            )
        print(f"-- Spark SQL on the catalog {catalog}", file=sys.stderr)
        return _answer(CatalogSQL(catalog), query, args)
    as_of = parse_as_of(args.as_of)
    lakehouse = Lakehouse(None, args.lakehouse, engine="rs")
    if not lakehouse.remote and not lakehouse.root.is_dir():
        raise InvalidArgumentError(
            f"no lakehouse at {lakehouse.root} (--lakehouse DIR or S3TM_LAKEHOUSE; "
            "`s3tm demo` builds one)"
        )
    engine = LakehouseSQL(lakehouse, as_of)
    for name, registered in sorted(engine.tables.items()):
        if registered.as_of is not None:
            print(
                f"-- {name} as of {registered.as_of}: version {registered.version}", file=sys.stderr
            )
    return _answer(engine, query, args)


def _answer(engine: Any, query: str | None, args: argparse.Namespace) -> int:
    if query is None:
        return _prompt(engine, args)
    write_result(engine.query(query), args.format, sys.stdout, max_rows=args.max_rows)
    return 0


def _prompt(engine: Any, args: argparse.Namespace) -> int:
    """Read statements (ending with ``;``) until ``\\q`` or end of input."""
    from core.errors import S3TMError

    interactive = sys.stdin.isatty()
    if interactive:
        import readline  # noqa: F401  (line editing and history for input())

        tables = ", ".join(sorted(engine.tables)) or "none yet"
        print(f"s3tm sql: tables {tables}\nend a statement with ';', \\q quits")
    buffer: list[str] = []
    failed = False
    while True:
        try:
            line = (
                input("s3tm> " if not buffer else "  ... ") if interactive else sys.stdin.readline()
            )
        except EOFError:
            line = ""
            if interactive:
                print()
        if not interactive and line == "":
            break
        if interactive and line == "" and not buffer:
            continue
        if line.strip() in ("\\q", "quit", "exit") and not buffer:
            break
        buffer.append(line.rstrip("\n"))
        text = "\n".join(buffer).strip()
        if not text.endswith(";"):
            continue
        buffer = []
        if not text.rstrip(";").strip():
            continue
        try:
            write_result(engine.query(text), args.format, sys.stdout, max_rows=args.max_rows)
        except S3TMError as err:
            print(f"error: {err}", file=sys.stderr)
            failed = True
    if buffer and "\n".join(buffer).strip():
        try:
            write_result(
                engine.query("\n".join(buffer)), args.format, sys.stdout, max_rows=args.max_rows
            )
        except S3TMError as err:
            print(f"error: {err}", file=sys.stderr)
            failed = True
    # a script piped in fails as a whole when a statement failed; a person's session does not
    return 2 if failed and not interactive else 0


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def write_result(result: pa.Table, fmt: str, out: TextIO, *, max_rows: int = 1000) -> None:
    """Print a result as an aligned table, CSV (with header) or JSON lines."""
    from core.formatting import format_table

    rows = result.to_pylist()
    if fmt == "json":
        for row in rows:
            out.write(json.dumps(row, default=str) + "\n")
        return
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(result.column_names)
        for row in rows:
            writer.writerow(["" if v is None else _cell(v) for v in row.values()])
        out.write(buffer.getvalue())
        return
    shown = rows[:max_rows]
    out.write(format_table(result.column_names, [[_cell(v) for v in r.values()] for r in shown]))
    out.write("\n")
    more = f", first {max_rows} shown (--max-rows)" if len(rows) > max_rows else ""
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''}{more})\n")
