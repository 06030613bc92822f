"""The size sweep's section: "How cost grows with size", from the runs of one `bench --profiles` sweep.

Each size is its own run (its own results dir and report); the manifest of every run of a sweep lists
the runs before it, so the last report covers every size. Per backend and size: ingest time,
relationships/s, rows written, footprint, bytes per relationship (the reference load test's import
table), check p50/p95 and heavy lookup p50/p95 at the lowest concurrency, a log-log chart per measure,
and the slope of a least-squares fit of log(measure) on log(relationships).
"""

from __future__ import annotations

import math
from pathlib import Path

from authzbench.core.numbers import fixed
from authzbench.report.core import charts
from authzbench.report.core.data import RunData, sweep_runs
from authzbench.report.sweep import chart, growth, projected
from authzbench.report.sweep.runs import (
    MEASURES,
    answers_line,
    labelled,
    mismatch_lines,
    size_table,
)

# The measures the growth table fits: one per need (rows written and relationships/s follow from the others)
GROWTH = ("ingest_s", "footprint_mib", "bytes_per_rel", "check_p95_ms", "lookup_p95_ms", "write_p95_ms")


def _fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return fixed(v, 0) if abs(v) >= 100 else fixed(v, 2)


def section(rd: RunData, out_dir: Path) -> str:
    """The markdown section, or "" when this run is not part of a sweep of at least two sizes."""
    runs = sweep_runs(rd)
    if len(runs) < 2:
        return ""
    df = size_table(runs)
    if df.empty:
        return ""
    sizes = ", ".join(f"`{r.manifest['dataset']['profile']}` ({r.manifest['dataset']['relationships']:,} "
                      f"relationships, run `{r.path.name}`, {answers_line(r)})" for r in runs)
    lines = ["## How cost grows with size", "",
             *mismatch_lines(runs),
             f"The same scenarios at each size of the sweep: {sizes}. Latencies at the lowest concurrency; "
             "check = every check scenario's ops merged; heavy lookup = `lookup_resources_manage_super`. "
             "Structural write = `write_membership` and `write_hierarchy` merged. An exponent of 1.0 is "
             "linear growth, 0 is flat.", "",
             "| backend | size | relationships | " + " | ".join(MEASURES.values()) + " | note |",
             "|---|---|---:|" + "---:|" * len(MEASURES) + "---|"]
    shown = labelled(runs, df)
    for _, r in shown.sort_values(["backend", "relationships"]).iterrows():
        lines.append(f"| {r['backend']} | {r['profile']} | {r['relationships']:,} | "
                     + " | ".join(_fmt(r[m]) for m in MEASURES) + f" | {_note(r)} |")
    lines += [
        "",
        "Growth with size: the exponent k of measure ~ size^k, a least-squares fit of log(measure) on "
        "log(relationships) with its standard error and 95% interval over three or more sizes (a two-point "
        "slope has none). A series is flagged as not a power law where the slopes between neighbouring sizes "
        "disagree beyond their rounds' ranges (local-slopes test), or where the fit misses a size by more "
        "than its rounds' spread (residuals test).", "",
        *growth.lines(shown, "relationships", "size", {m: MEASURES[m] for m in GROWTH})]
    if check := projected.check_table(shown):
        lines += ["", *check]
    drawn = chart.size_sweep(rd, df, MEASURES, charts.chart_dir(out_dir, rd.manifest["run_id"]))
    if drawn:
        lines += ["", *(f"![{MEASURES[m]}]({p})" for m, p in drawn.items())]
    return "\n".join(lines) + "\n"


def _note(row) -> str:
    """The row's note, or nothing: rows without one hold NaN in the frame, which must not print as "nan"."""
    note = row.get("note")
    return note if isinstance(note, str) else ""
