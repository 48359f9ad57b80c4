"""A routing table as a directory of files: what ``s3tm learn`` writes and ``s3tm
evaluate`` reads (the platform's versions are Delta rows: ``routing.mappings``). The
mapping's rows and the subscribed words as Parquet, the learner's manifest as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import InvalidArgumentError, MappingFormatError
from core.routing.table import LearnerManifest, RoutingTable

MAPPING_FILE = "mapping.parquet"
SUBSCRIBED_FILE = "subscribed_words.parquet"
MANIFEST_FILE = "manifest.json"


def save_table(table: RoutingTable, directory: str | Path) -> Path:
    """Write the table directory (overwriting its files); returns the directory."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.to_arrow(), target / MAPPING_FILE)
    subscribed_path = target / SUBSCRIBED_FILE
    if table.subscribed_words is not None:
        words = pa.table({"word": pa.array(sorted(table.subscribed_words), pa.string())})
        pq.write_table(words, subscribed_path)
    elif subscribed_path.exists():
        subscribed_path.unlink()
    manifest: LearnerManifest = {
        **table.manifest,
        "n_matchers": table.n_matchers,
        "subscribed_words": None if table.subscribed_words is None else len(table.subscribed_words),
    }
    (target / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return target


def load_table(directory: str | Path) -> RoutingTable:
    """Read a table directory written by :func:`save_table`.

    Raises:
        MappingFormatError: if a file is missing or inconsistent.
    """
    source = Path(directory)
    for name in (MAPPING_FILE, MANIFEST_FILE):
        if not (source / name).is_file():
            raise MappingFormatError(f"{source} is not a routing table: {name} missing")
    try:
        manifest: LearnerManifest = json.loads((source / MANIFEST_FILE).read_text())
        n_matchers = int(manifest["n_matchers"])
    except (ValueError, KeyError) as err:
        raise MappingFormatError(f"{source / MANIFEST_FILE}: unreadable manifest") from err
    frame = pq.read_table(source / MAPPING_FILE)
    subscribed = None
    if (source / SUBSCRIBED_FILE).is_file():
        subscribed = pq.read_table(source / SUBSCRIBED_FILE).column("word").to_pylist()
    try:
        return RoutingTable.from_rows(
            frame["word"],
            frame["part"],
            frame["matcher_id"],
            n_matchers,
            subscribed_words=subscribed,
            manifest=manifest,
        )
    except (InvalidArgumentError, KeyError) as err:
        raise MappingFormatError(f"{source}: {err}") from err
