"""4 Write performance: ingest and closure build, per backend and load path, with its monitor table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from authzbench.report.core.data import RunData
from authzbench.report.core.ranking import Dimension, Figure, single_basis, single_bounds, single_note
from authzbench.report.core.tables import anchor, label, link_target, monitor_summary, table


def section(rd: RunData, out_dir: Path) -> str:
    lines = ["## 4. Write performance (ingest and closure build)", ""]
    df = rd.ingest.copy()
    if df.empty:
        return "\n".join([*lines, "_no ingest recorded_", ""])
    # An ingest variant (another load path of the same backend) is its own row, named by its path.
    df["backend"] = [label(rd, b) + (f" via {v}" if v else "") for b, v in zip(df["backend"], df["variant"],
                                                                               strict=True)]
    # a count, not a float, where some loads timed no batches (NaN in the column): "97", and "—" for none
    df["batches"] = pd.Series(
        [int(x) if pd.notna(x) else None for x in df["batches"]], index=df.index, dtype=object)
    df["footprint_mb"] = df["footprint_bytes"].astype(float) / 2**20
    df["written_mb"] = df["bytes_written"].astype(float) / 2**20
    df["note"] = [("reused from an earlier prepare; " if r else "")
                  + ", ".join(f"{k} {_plain(v)}" for k, v in n.items() if not _restated(k))
                  for r, n in zip(df["reused"], df["notes"], strict=True)]
    df["bytes_per_rel"] = df["footprint_bytes"].astype(float) / df["relationships"]
    df["rows_per_rel"] = df["rows"] / df["relationships"]
    df = df.sort_values("rels_per_s", ascending=False)
    lines.append(link_target("ingest"))
    lines.append(
        table(df,
              {"backend": "Backend", "relationships": "Relationships", "load_s": "Ingest (s)",
               "build_s": "Closure/MV/index build (s)", "total_s": "Total (s)",
               "rels_per_s": "Relationships/s (incl. build)",
               "load_rels_per_s": "Relationships/s (ingest only)", "rows": "Rows written (incl. expanded)",
               "rows_per_rel": "Rows per relationship", "rows_per_s": "Rows/s", "batch_rows": "Batch (rows)",
               "batches": "Batches", "batch_mean_s": "Batch mean (s)", "batch_p95_s": "Batch p95 (s)",
               "written_mb": "Written by the load (MiB)", "footprint_mb": "Footprint (MiB)",
               "bytes_per_rel": "Bytes per relationship", "build_what": "Build step"}))
    # each load's notes under the table, not in a cell: they made rows of up to 846 characters
    lines += ["Notes per load:", ""]
    lines += [f"- **{b}**: {n}" for b, n in zip(df["backend"], df["note"], strict=True) if n]
    return "\n".join([*lines, ""])


def monitor(rd: RunData, out_dir: Path) -> str:
    return monitor_summary(rd, "ingest", "Monitor summary during ingest")


def _restated(key: str) -> bool:
    """A backend's own rate of relationships (over a part of its load it timed itself) beside the table's two
    would be a third definition of relationships/s: Elasticsearch's row read 46,746 and 57,527."""
    return key.endswith("relationships_per_s")


def _plain(v) -> str:
    """A note's value as a person writes it: 15, not 15.0; 2.5, not 2.50000."""
    if isinstance(v, float):
        return f"{v:,.0f}" if v == int(v) else f"{v:,.3g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def ingest(rd: RunData) -> list[Dimension]:
    df = rd.ingest
    if df.empty:
        return []
    df = df[df["variant"] == ""]
    figs = [Figure(r.backend, float(r.rels_per_s), detail=f"{r.total_s:.1f} s incl. {r.build_s:.1f} s build; "
                   f"{r.rows / r.relationships:.1f} rows written per relationship",
                   bounds=single_bounds(float(r.rels_per_s), "ingest"), basis=single_basis("ingest"))
            for r in df.itertuples()]
    return [Dimension("Writes", "Ingest incl. closure / view / index build", "relationships/s", True, figs,
                      anchor("ingest"), single_note("ingest"),
                      summary="ingest rels/s", key="ingest")]


def footprint(rd: RunData) -> list[Dimension]:
    df = rd.ingest
    if df.empty:
        return []
    df = df[(df["variant"] == "") & df["footprint_bytes"].notna()]
    figs = [Figure(r.backend, float(r.footprint_bytes) / r.relationships,
                   detail=f"{float(r.footprint_bytes) / 2**20:,.1f} MiB") for r in df.itertuples()]
    return [Dimension("Resources", "Footprint on disk", "bytes/relationship", False, figs, anchor("ingest"),
                      summary="footprint", key="footprint")]
