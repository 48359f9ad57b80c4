"""What the arrow reads and the staged commits need of a lakehouse's Delta tables.

``DeltaStore`` implements it; the helper modules name this protocol instead of the class, so
``delta_store`` imports them and nothing imports ``delta_store`` back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import deltalake
    import pyarrow.fs


class TableStore(Protocol):
    """The Delta tables of one lakehouse location, as delta-rs opens them."""

    storage_options: dict[str, str] | None
    fs: pyarrow.fs.FileSystem

    def path(self, name: str) -> str:
        """The table's location (a path or URI)."""
        ...

    def fs_path(self, location: str) -> str:
        """``location`` (a path or URI of this lakehouse) as a path in ``fs``."""
        ...

    def exists(self, name: str) -> bool: ...

    def delta_table(self, name: str, version: int | None = None) -> deltalake.DeltaTable: ...

    def version(self, name: str) -> int | None: ...

    def evolve(self, name: str) -> list[str]:
        """Adds the spec's columns the table lacks; returns their names."""
        ...

    def already_committed(self, name: str, app_id: str | None, batch_id: int | None) -> bool: ...
