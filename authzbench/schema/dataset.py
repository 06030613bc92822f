"""A generated dataset on disk: one Parquet file per relation plus manifest.json.

Layout of DATA_DIR/<name>/:
  manifest.json         profile, model, seed, params, counts, per-file sha256, content hash
  <relation>.parquet    columns object:int32, subject:int32, sorted by (object, subject)
  COMPLETE              written last; a dataset without it is a partial one and is refused
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from authzbench.core.errors import UserError
from authzbench.schema.model import Relationship, relation_defs

MANIFEST = "manifest.json"
COMPLETE_MARK = "COMPLETE"


@dataclass
class Dataset:
    path: Path
    manifest: dict

    @classmethod
    def open(cls, path: str | Path) -> Dataset:
        p = Path(path)
        if not (p / MANIFEST).is_file():
            raise UserError(f"no dataset at {p}: run `authzbench generate` first")
        if not (p / COMPLETE_MARK).is_file():
            raise UserError(f"dataset at {p} is incomplete (generation was interrupted): generate it again")
        return cls(p, json.loads((p / MANIFEST).read_text()))

    @property
    def model(self) -> str:
        return self.manifest["model"]

    @property
    def profile(self) -> str:
        return self.manifest["profile"]

    @property
    def hash(self) -> str:
        return self.manifest["content_hash"]

    @property
    def counts(self) -> dict[str, int]:
        return self.manifest["counts"]

    @property
    def entities(self) -> dict[str, int]:
        """Number of ids per object type, e.g. {"user": 1600, "resource": 32000}; ids are 0..n-1."""
        return self.manifest["entities"]

    def relations(self) -> list[str]:
        return list(self.manifest["counts"])

    def authz_relations(self) -> list[str]:
        defs = relation_defs(self.model)
        return [r for r in self.relations() if defs[r].authz]

    def file(self, relation: str) -> Path:
        return self.path / f"{relation}.parquet"

    def table(self, relation: str) -> pd.DataFrame:
        """The whole relation as a DataFrame with int32 columns object, subject."""
        return self._tables[relation]

    @cached_property
    def _tables(self) -> dict[str, pd.DataFrame]:
        return _LazyTables(self)

    def iter_batches(self, relation: str, batch_rows: int = 65536) -> Iterator[pd.DataFrame]:
        """Stream a relation in DataFrames of at most batch_rows rows (bounded memory for xl)."""
        pf = pq.ParquetFile(self.file(relation))
        for batch in pf.iter_batches(batch_size=batch_rows):
            yield batch.to_pandas()

    def relationships(self, relations: list[str] | None = None) -> Iterator[Relationship]:
        """Every authorization relationship, one at a time (for row-at-a-time drivers)."""
        for rel in relations or self.authz_relations():
            for df in self.iter_batches(rel):
                for o, s in zip(df["object"].tolist(), df["subject"].tolist(), strict=True):
                    yield Relationship(rel, o, s)

    @property
    def total_relationships(self) -> int:
        defs = relation_defs(self.model)
        return sum(n for r, n in self.counts.items() if defs[r].authz)

    @property
    def acl_relationships(self) -> int:
        return sum(self.counts.get(r, 0) for r in self.manifest.get("acl_relations", []))


class _LazyTables(dict):
    def __init__(self, ds: Dataset):
        super().__init__()
        self._ds = ds

    def __missing__(self, relation: str) -> pd.DataFrame:
        if relation not in self._ds.counts:
            raise KeyError(f"dataset has no relation {relation!r}")
        df = pq.read_table(self._ds.file(relation)).to_pandas()
        self[relation] = df
        return df
