"""The report's "Structural writes" section: what keeping permissions fresh costs on each backend, and how
stale its answers get, from the write scenarios' records (scenarios/writes.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from authzbench.report.core import charts
from authzbench.report.core.data import RunData
from authzbench.report.core.frames import write_table
from authzbench.report.core.tables import anchor, label, mark_write_percentiles, table
from authzbench.report.freshness import STALE_COLUMN, STRICT_PREFIXES, rate_cell, strict_stale_note
from authzbench.run.restore import HEAVY_CHECKS, HEAVY_LOOKUP_MAX_S
from authzbench.scenarios.catalog import SCENARIOS


def _strict_stale_allows(rd: RunData, df: pd.DataFrame) -> list[str]:
    """Where a fully consistent mode still allowed after a revocation: the reproduction outside the suite."""
    strict = df[df["consistency"].str.startswith(STRICT_PREFIXES) & (df["stale_allows"] > 0)]
    if strict.empty:
        return []
    pairs = list(dict.fromkeys(zip(strict["backend"], strict["consistency"], strict=True)))
    return ["", strict_stale_note(rd, pairs)]


def restored_table(rd: RunData) -> pd.DataFrame:
    rows = [r for r in rd.records if r.get("type") == "restored"]
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows)
    for col in ("scratch_left", "scratch_cleaned", "scratch_still_left"):  # absent after mixed phases
        df[col] = df[col].fillna(0).astype(int) if col in df else 0
    return df.groupby("backend", sort=False).agg(phases=("phase", "size"), checked=("checked", "sum"),
                                                  mismatches=("mismatches", "sum"),
                                                  scratch_left=("scratch_left", "sum"),
                                                  scratch_cleaned=("scratch_cleaned", "sum"),
                                                  scratch_still_left=("scratch_still_left", "sum")).reset_index()


# Until 20261128 every writing phase was followed by the sampled check (ec2d477 made it the visit's last).
_EVERY_PHASE_SAMPLED = (
    "After every write scenario's phase, after each visit's last mixed phase and after any mixed phase that did "
    "not end cleanly, a sample of checks and the median viewer's lookup were compared with the pristine oracle "
    "(every write undone; a mixed phase undoes its own writes, and every later answer is compared with the "
    "oracle too), and after the backend's last such phase the heaviest user's lookup too. Each write op's own "
    "probe and control were checked too: an op stopped midway (a worker stopped at the phase's time limit) can "
    "leave its grant in place, where a later op reusing its scratch ids would see it. Those ops were cleaned up "
    "(every op of a phase whose workers were stopped mid-op, since a half-done write can leave other users' rows "
    "behind where no probe shows them) before the comparison:")


def restore_method(rd: RunData) -> str:
    """What the restore checks compared, as the records show it: a run whose every restore check compared a
    sample is described as such; otherwise the targeted checks, with the backends whose heaviest user was
    compared by checks."""
    restored = [r for r in rd.records if r.get("type") == "restored"]
    if all(r["checked"] > 0 for r in restored):
        return _EVERY_PHASE_SAMPLED
    by_checks = sorted({r["backend"] for r in restored if r.get("heavy") == "checks"})
    heavy = ("the heaviest user's lookup too" if not by_checks else
             f"the heaviest user's lookup too, except for {', '.join(label(rd, b) for b in by_checks)}: "
             f"that lookup took over {HEAVY_LOOKUP_MAX_S:g} s an op in this run, so the user was compared by "
             f"check on up to {HEAVY_CHECKS} resources they hold and {HEAVY_CHECKS} they do not instead")
    return ("After each write scenario's phase, its ops' own probes and controls (the users its writes touched) "
            "were checked. An op stopped midway (a worker stopped at the phase's time limit) can leave its grant "
            "in place, where a later op reusing its scratch ids would see it; such ops were cleaned up first "
            "(every op of a phase whose workers were stopped mid-op, since a half-done write can leave other "
            "users' rows behind where no probe shows them). After each visit's last writing phase, and after any "
            "mixed phase that did not end cleanly, a sample of checks and the median viewer's lookup were "
            "compared with the pristine oracle as well (every write undone; a mixed phase undoes its own writes, "
            f"and every later answer is compared with the oracle too); after the backend's last one, {heavy}:")


def stopped_table(rd: RunData) -> pd.DataFrame:
    """Write phases whose workers were given up on: how many were still running (an op honestly working past
    the wait's bound, or queued behind one) and how many hung (no progress for runner.HANG_S)."""
    names = {n for n, s in SCENARIOS.items() if s.op == "write"}
    nan = float("nan")  # a run recorded before the heartbeat cannot tell them apart
    rows = [{"phase": r["phase"], "backend": r["backend"], "stopped": r["stopped_workers"],
             "hung": r.get("hung_workers", nan), "running": r["stopped_workers"] - r.get("hung_workers", nan)}
            for r in rd.records if r.get("type") == "phase_end" and r.get("scenario") in names
            and r.get("stopped_workers")]
    return pd.DataFrame(rows)


def section(rd: RunData, out_dir: Path) -> str:
    """Markdown of the section, with its chart."""
    run_id = rd.manifest["run_id"]
    df = write_table(rd)
    if df.empty:
        return ""
    df["backend_l"] = [label(rd, b) for b in df["backend"]]
    df["stale"] = [rate_cell(k, n) for k, n in zip(df["stale_allows"], df["revocations"], strict=True)]
    lines = ["## Structural writes", "",
             "Each op grants access through one kind of edge (a scratch user, or for `write_hierarchy` a scratch "
             "group holding a big real group, so the edge carries real members), then revokes it; "
             "`revoke_then_check` revokes a grant made untimed first. Write latency is the call until the backend "
             "acknowledged; visibility lag runs from the write's return to the start of the first check that "
             "reflected it (polled every 1 ms, bounded at 10 s: never visible = an error). A stale read answered "
             "the state before a write that had returned; a stale allow is a revocation whose first check still "
             "allowed (Zanzibar's new enemy). Rows touched are what the backend reported writing (rows, documents, "
             "permission entries; n/a where it cannot count). Expected answers come from the simple evaluator "
             "following every write. An op may run past its 120 s bound: while some worker of the phase still "
             "progresses (rows written, checks answered) the phase waits for it, up to 10x the bound per 4 workers; a worker "
             "without progress for 60 s is hung. Warm-up ops are ACL grants on scratch users of their own.", ""]
    lines += [f'<a id="{anchor(n)}"></a>' for n in ["structural-writes", *df["scenario"].unique()]]
    lines.append(table(mark_write_percentiles(df.sort_values(["scenario", "backend", "concurrency"])), {
        "scenario": "Write kind", "backend_l": "Backend", "consistency": "Read consistency", "concurrency": "Workers",
        "ops": "Writes",
        "write_p50_ms": "Write p50 (ms)", "write_p95_ms": "Write p95 (ms)", "write_p99_ms": "Write p99 (ms)",
        "vis_p50_ms": "Visibility p50 (ms)", "vis_p95_ms": "Visibility p95 (ms)", "vis_max_ms": "Visibility max (ms)",
        "rows_mean": "Rows touched (mean)", "rows_max": "Rows touched (max)", "stale_reads": "Stale reads",
        "stale": STALE_COLUMN, "never_visible": "Never visible", "mismatches": "Mismatches"}))
    lines += _strict_stale_allows(rd, df)
    if chart := charts.structural_writes(rd, df, charts.chart_dir(out_dir, run_id)):
        lines += ["", f"![write and visibility p95 per backend and write kind]({chart})"]
    stopped = stopped_table(rd)
    lines += ["", "Workers stopped mid-op: none." if stopped.empty else
              "Workers stopped mid-op (still running = progressing when the wait reached its bound; hung = no "
              "progress for 60 s):\n\n" + table(stopped, {"phase": "Phase", "stopped": "Stopped", "running":
                                                          "Still running", "hung": "Hung"})]
    restored = restored_table(rd)
    if not restored.empty:
        restored["backend_l"] = [label(rd, b) for b in restored["backend"]]
        lines += ["", restore_method(rd), "",
                  table(restored, {"backend_l": "Backend", "phases": "Phases verified", "checked": "Answers compared",
                                   "mismatches": "Differences", "scratch_left": "Ops found left midway",
                                   "scratch_cleaned": "Ops cleaned up",
                                   "scratch_still_left": "Still left after clean-up"})]
    return "\n".join([*lines, ""])
