"""The report's run timeline: where the wall-clock time of a run went (each backend's start, load, phases,
restore checks, stop; the dataset, oracle and expected answers), so the next slow step is named."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd

from authzbench.core.records import PhaseEnd, PhaseStart, Record, Step
from authzbench.report.core import tables
from authzbench.report.core.data import RunData

SLOWEST = 5  # steps named under the table


def steps(recs: list[Record]) -> pd.DataFrame:
    """One row per step: the `step` records, and each phase from its phase_start record to its phase_end
    record (workers started, warm-up and the measured part: more than the phase's measured wall_s)."""
    rows = [{"backend": r.backend or "", "step": r.step, "t0": r.t0, "seconds": r.seconds}
            for r in recs if isinstance(r, Step)]
    ends = {r.phase: r for r in recs if isinstance(r, PhaseEnd)}
    for r in recs:
        # records made by hand may lack ts
        if (isinstance(r, PhaseStart)
            and r.phase in ends
            and r.ts is not None
            and ends[r.phase].ts is not None):
            rows.append({"backend": r.backend, "step": f"phase {r.phase}", "t0": r.ts,
                         "seconds": ends[r.phase].ts - r.ts})
    df = pd.DataFrame(rows, columns=["backend", "step", "t0", "seconds"])
    return df.sort_values("t0", kind="stable").reset_index(drop=True)


def _kind(step: str) -> str:
    for k in ("start", "load", "stop"):
        if step == k:
            return k
    return (
        "phases" if step.startswith("phase ") else "restore checks" if step.startswith("restore") else "other"
    )


def per_backend(df: pd.DataFrame) -> pd.DataFrame:
    """Seconds per backend and kind of step, and the backend's span from its first step's start to its
    last step's end (what it added to the run's wall clock)."""
    rows = []
    for backend, sub in df[df["backend"] != ""].groupby("backend", sort=False):
        kinds = sub.assign(kind=sub["step"].map(_kind)).groupby("kind")["seconds"].sum()
        n_phases = int(sub["step"].str.startswith("phase ").sum())
        span = (sub["t0"] + sub["seconds"]).max() - sub["t0"].min()
        rows.append({"backend": backend, **{k: float(kinds.get(k, 0.0)) for k in
                                            ("start", "load", "phases", "restore checks", "stop")},
                     "n_phases": n_phases, "span_s": span})
    return pd.DataFrame(rows)


def measured_windows(recs: list[Record]) -> dict[str, float]:
    """Seconds each backend spent inside measured windows (phase_end wall_s, re-runs included)."""
    out: dict[str, float] = {}
    for r in recs:
        if isinstance(r, PhaseEnd):
            out[r.backend] = out.get(r.backend, 0.0) + float(r.wall_s or 0.0)
    return out


def section(rd: RunData, out_dir: Path) -> str:
    df = steps(rd.records)
    label = partial(tables.label, rd)
    table = tables.table
    if df.empty:
        return ""
    wall = (df["t0"] + df["seconds"]).max() - df["t0"].min()
    pb = per_backend(df)
    windows = measured_windows(rd.records)
    out = ["## Run timeline\n",
           f"Where this run's {wall / 60:.1f} minutes of wall clock went (from the first recorded step's "
           "start to the last one's end; seconds measured around each step as it ran). A backend's span "
           "runs from its start to its stop and includes the steps not itemized (e.g. reading the "
           "server's version).\n"]
    if not pb.empty:
        pb["measured"] = pb["backend"].map(windows).fillna(0.0)
        pb["backend"] = pb["backend"].map(label)
        out.append(
            table(pb,
                  {"backend": "Backend", "start": "Start (s)", "load": "Load (s)", "n_phases": "Phases",
                   "phases": "Phases (s)", "measured": "of which measured (s)",
                   "restore checks": "Restore checks (s)", "stop": "Stop (s)", "span_s": "Span (s)"},
                  digits=1))
        out.append(
            f"\nMeasured windows (from each phase's shared start of measuring to its stop, every attempt): "
            f"{sum(windows.values()) / 60:.1f} of the {wall / 60:.1f} minutes, "
            f"{sum(windows.values()) / wall:.0%} of the wall clock; the rest is loads, restore checks, "
            "and each phase's workers, warm-up and hand-offs.")
        loads = float(pb["load"].fillna(0.0).sum()) if "load" in pb else 0.0
        if loads:  # a load is the ingest figure's own measurement: timed whole, every row written
            both = sum(windows.values()) + loads
            out.append(
                f"With the loads, which measure ingest ({loads / 60:.1f} minutes): {both / 60:.1f} minutes, "
                f"{both / wall:.0%} of the wall clock.")
    shared = df[df["backend"] == ""]
    if not shared.empty:
        out.append(
            f"\nShared steps (before and between backends): {shared['seconds'].sum():.1f} s in all, of which "
            f"{', '.join(f'{r.step} {r.seconds:.1f} s' for r in shared.nlargest(3, 'seconds').itertuples())}."
        )
    top = df.nlargest(SLOWEST, "seconds")
    out.append(f"\nThe {len(top)} slowest steps: " + "; ".join(
        f"{i}. {(label(r.backend) + ' ') if r.backend else ''}{r.step} ({r.seconds:,.1f} s)"
        for i, r in enumerate(top.itertuples(), 1)) + ".\n")
    return "\n".join(out)
