"""A routing table as the directory ``s3tm learn`` writes and ``s3tm evaluate`` reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import MappingFormatError
from core.routing.table import RoutingTable
from s3tm.mapping_files import load_table, save_table


def test_table_round_trip(tmp_path: Path) -> None:
    words, parts, matchers = ["a", "hot", "hot", "hot", "b"], [0, 0, 1, 2, 0], [3, 0, 1, 2, 2]
    table = RoutingTable.from_rows(
        words,
        parts,
        matchers,
        4,
        subscribed_words=["a", "b", "hot", "x"],
        manifest={"algorithm": "salb", "label": "salb+split"},
    )
    loaded = load_table(save_table(table, tmp_path / "m"))
    assert loaded.to_frame().equals(table.to_frame())
    assert loaded.subscribed_words == table.subscribed_words
    assert loaded.manifest["label"] == "salb+split" and loaded.n_split_words == 1
    assert loaded.version_matchers("hot").tolist() == [0, 1, 2]


def test_a_directory_that_is_no_table_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MappingFormatError, match=r"mapping\.parquet missing"):
        load_table(tmp_path)
    (tmp_path / "mapping.parquet").write_bytes(b"")
    (tmp_path / "manifest.json").write_text("{broken")
    with pytest.raises(MappingFormatError, match="unreadable manifest"):
        load_table(tmp_path)
