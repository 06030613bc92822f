"""The CQL tables' layout and the load progress the Cassandra / ScyllaDB adapter (scylla.py), its two
ingest paths (scylla_cql.py, scylla_sstable.py) and its writes (scylla_writes.py) share."""

from __future__ import annotations

from authzbench.backends.base import Progress

# A source row (serialized per row in Python) costs ~5 permission rows (one numpy-built slice per batch):
# measured 77k vs 345k rows/s at large, 58k vs 370-418k at baseline. Progress weighs rows by it: counted
# alike, the first 30 s (source rows) projected large to 33 min where it loads in 6.
SOURCE_ROW_COST = 5
# Through SSTables a source row costs ~3 permission rows (the tables are sorted by partition in numpy first):
# at xl the first 30 s wrote ~16M source rows (~530k/s) where baseline wrote permission rows at 1.6M/s.
# Counted alike, those 30 s projected xl to 34 min and the load bound stopped it.
SSTABLE_SOURCE_ROW_COST = 3
# Source relations by object type: each lands in rel_<type> (one partition per object).
SOURCE_TABLE = {"organization": "rel_org", "group": "rel_group", "resource": "rel_resource"}
# Relations whose reverse (subject -> objects) the write path walks; see cql.cql.
REVERSE = ("group_member", "group_manager", "group_child", "org_admin", "resource_org",
           "resource_manager_group", "resource_viewer_group")
# rel_resource stores the relation name without its "resource_" prefix (shorter clustering keys).


def _short(rel: str) -> str:
    return rel.removeprefix("resource_").removeprefix("group_").removeprefix("org_")


class _Ticker:
    """Progress in relationships while rows are written: `done` rows (updated by driver callbacks)
    are reported, scaled, from the loading thread."""

    def __init__(self, progress: Progress, scale: float):
        self.progress, self.scale = progress, scale
        self.done: float = 0
        self._reported = 0

    def flush(self) -> None:
        target = int(self.done * self.scale)
        if target > self._reported:
            self.progress(target - self._reported)
            self._reported = target
