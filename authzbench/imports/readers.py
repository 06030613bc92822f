"""The graph readers by format name: what `authzbench import --format NAME` reads, and how its origin is
recorded. A new reader is one entry: its edges, the files it read (hashed into the manifest) and its
mapping."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from authzbench.core.errors import UserError
from authzbench.imports import reference_csv
from authzbench.imports.edges import Edge
from authzbench.imports.graph import file_digest


class Reader(NamedTuple):
    edges: Callable[[Path], Iterator[Edge]]  # every edge under the path, in the model's relation names
    files: Callable[[Path], list[Path]]  # the source files it reads (refuses a missing one)
    mapping: dict[str, str]  # source part -> how it becomes the model's relations
    describes: str  # one line for the help and the report


READERS: dict[str, Reader] = {
    "reference-csv": Reader(reference_csv.edges, reference_csv.files, reference_csv.MAPPING,
                            "the reference suite's CSV files (ifundeasy/test-rlp data/)"),
}


def reader(name: str) -> Reader:
    if name not in READERS:
        raise UserError(f"--format {name}: valid: {', '.join(READERS)}")
    return READERS[name]


def origin(name: str, path: Path) -> dict:
    """What the manifest records of where an import came from (file base names only: no local paths)."""
    r = reader(name)
    return {"format": name, "describes": r.describes, "mapping": r.mapping,
            "files": {f.name: file_digest(f) for f in r.files(path)}}
