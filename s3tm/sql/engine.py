"""``s3tm sql``'s engine: DuckDB over the lakehouse's Delta tables, each registered under its
own name (``routing.versions``, ``matches``, ...) as a view of one Delta version.

The tables reach DuckDB as lazy pyarrow datasets over exactly the Parquet files of the
version delta-rs resolves (``Lakehouse.snapshot``): no Delta JVM jars, no DuckDB extension
download, and DuckDB pushes projections and filters into the scan. A table may be pinned to
an earlier version or timestamp (time travel) with :class:`AsOf`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from core.errors import InputDataError, InvalidArgumentError
from schemas.tables import TABLES

AsOfValue = int | dt.datetime
_AS_OF = re.compile(r"^(?P<table>[a-z_][a-z0-9_.]*)=(?P<value>.+)$")


def parse_as_of(items: Iterable[str]) -> dict[str, AsOfValue]:
    """``["routing.mappings=12", "matches=2026-11-22T10:00:00Z"]`` -> {table: version or
    timestamp}. A number is a Delta version; anything else must be an ISO-8601 timestamp
    (no zone = UTC).

    Raises:
        InvalidArgumentError: an unknown table, or a value that is neither.
    """
    pinned: dict[str, AsOfValue] = {}
    for item in items:
        match = _AS_OF.match(item.strip())
        if not match:
            raise InvalidArgumentError(
                f"--as-of takes TABLE=VERSION or TABLE=TIMESTAMP, got {item!r}"
            )
        name, value = match["table"], match["value"].strip()
        if name not in TABLES:
            raise InvalidArgumentError(
                f"--as-of: unknown table {name!r} (tables: {', '.join(TABLES)})"
            )
        if value.isdigit():
            pinned[name] = int(value)
            continue
        try:
            stamp = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgumentError(
                f"--as-of {name}: {value!r} is neither a version number nor an ISO-8601 timestamp"
            ) from None
        pinned[name] = stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
    return pinned


@dataclass(frozen=True)
class RegisteredTable:
    """A table as the SQL engine sees it: its name and the Delta version behind it."""

    name: str
    version: int
    as_of: AsOfValue | None


class LakehouseSQL:
    """A DuckDB connection with every existing lakehouse table registered by its name.

    ``as_of`` pins tables to an earlier version or timestamp; others are at their latest
    version when the connection is made (:meth:`refresh` re-reads them).
    """

    def __init__(self, lakehouse: Any, as_of: Mapping[str, AsOfValue] | None = None) -> None:
        import duckdb

        self.lakehouse = lakehouse
        self.as_of = dict(as_of or {})
        missing = [name for name in self.as_of if not lakehouse.exists(name)]
        if missing:
            raise InputDataError(
                f"--as-of: table {', '.join(missing)} does not exist under {lakehouse.root}"
            )
        self.connection = duckdb.connect(":memory:")
        # timestamps are UTC in every table; dates of them are UTC dates
        self.connection.execute("SET TimeZone = 'UTC'")
        # Spark SQL's JSON accessor, so a query reads the same on the SQL server
        self.connection.execute(
            "CREATE MACRO get_json_object(doc, path) AS json_extract_string(doc, path)"
        )
        self.tables: dict[str, RegisteredTable] = {}
        self.refresh()

    def refresh(self) -> dict[str, RegisteredTable]:
        """(Re-)register every existing table at its pinned or latest version; returns
        the tables whose version changed."""
        changed = {}
        for name in TABLES:
            if not self.lakehouse.exists(name):
                continue
            as_of = self.as_of.get(name)
            current = self.tables.get(name)
            if current is not None and as_of is not None:
                continue  # pinned: never moves
            latest = self.lakehouse.version(name)
            if current is not None and current.version == latest:
                continue
            snapshot = self.lakehouse.snapshot(name, as_of)
            self._register(name, snapshot.dataset)
            self.tables[name] = changed[name] = RegisteredTable(name, snapshot.version, as_of)
            if name == "deliveries":
                self._derive_matches(snapshot.dataset.schema.names)
        return changed

    def _derive_matches(self, delivery_columns: list[str]) -> None:
        """A stream run with ``--no-matches-table`` writes deliveries only; they hold every
        match, so ``matches`` is then a view of them (one row per delivered sub id)."""
        if self.lakehouse.exists("matches"):
            return
        # DuckDB unnests lists of one row side by side; a row without matcher ids (written
        # before they were kept) gets NULL matchers
        matcher = "unnest(matcher_ids)" if "matcher_ids" in delivery_columns else "NULL::INTEGER"
        self.connection.execute(
            'CREATE OR REPLACE VIEW "matches" AS SELECT post_id, sub_id, subscriber, '
            "routing_version, matcher_id, delivered_at AS matched_at, batch_id FROM ("
            "SELECT post_id, subscriber, routing_version, delivered_at, batch_id, "
            f"unnest(sub_ids) AS sub_id, {matcher} AS matcher_id FROM deliveries)"
        )

    def _register(self, name: str, dataset: Any) -> None:
        con = self.connection
        internal = "_delta_" + name.replace(".", "__")
        con.register(internal, dataset)
        if "." in name:
            schema, table = name.split(".", 1)
            con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            con.execute(f'CREATE OR REPLACE VIEW "{schema}"."{table}" AS SELECT * FROM {internal}')
        else:
            con.execute(f'CREATE OR REPLACE VIEW "{name}" AS SELECT * FROM {internal}')

    def query(self, sql: str) -> pa.Table:
        """Run one SQL statement; its result as an Arrow table.

        Raises:
            InputDataError: bad SQL, an unknown table or column (one line, DuckDB's words).
        """
        import duckdb

        try:
            relation = self.connection.sql(sql)
            if relation is None:  # a statement without a result (SET, CREATE, ...)
                return pa.table({})
            return relation.to_arrow_table()
        except duckdb.Error as err:
            raise InputDataError(_one_line(err, self.tables)) from None


def _one_line(err: Exception, tables: Mapping[str, RegisteredTable]) -> str:
    """DuckDB's message, first line, with a hint for a table that does not exist."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if "does not exist" in text and ("Table" in text or "Catalog" in text):
        text += f" (tables here: {', '.join(sorted(tables)) or 'none yet'})"
    return text
