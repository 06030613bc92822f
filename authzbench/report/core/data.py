"""Run files -> tidy pandas tables. Every figure of the report is computed here from raw records, read as
their kinds' typed classes (core/records.py: RunStore.typed, decode), never as dicts."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from authzbench.core.metrics import merge, summarize
from authzbench.core.records import (
    BackendError,
    Disturbance,
    Ingest,
    IngestSkipped,
    Interval,
    Monitor,
    PhaseEnd,
    PhaseSkipped,
    PhaseStart,
    Record,
    Server,
    as_dict,
    decode,
)
from authzbench.report.core.declared import legacy_stand_ins
from authzbench.results.store import RunStore

T = TypeVar("T")


@dataclass
class RunData:
    path: Path
    manifest: dict
    records: list[Record]
    phases: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per (phase, kind)
    ingest: pd.DataFrame = field(default_factory=pd.DataFrame)
    monitor: pd.DataFrame = field(default_factory=pd.DataFrame)
    servers: dict[str, Server] = field(default_factory=dict)
    errors: list[BackendError] = field(default_factory=list)
    monitor_phases: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per monitored phase
    # phase rows another attempt replaced (re-run because other processes disturbed them): kept for the
    # validity section, never in a figure
    superseded: pd.DataFrame = field(default_factory=pd.DataFrame)
    # phases not run: every op predicted past its timeout
    skipped: list[PhaseSkipped] = field(default_factory=list)
    # tables derived from the frames above, computed once (derived()); never compared or printed
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def kind(self, backend: str) -> str:
        """"server": the product the backend is named for; "stand-in" (‡): another networked product in its
        place; "embedded" (†): no network and no server (embedded chdb, the in-process oracle)."""
        s = self.servers.get(backend)
        if s is None:
            return "server"
        if self.stands_in_for(backend):
            return "stand-in"
        return "server" if s.info.get("comparable", True) else "embedded"

    def stands_in_for(self, backend: str) -> str:
        """The product a stand-in's figures must not be read as ("" for the product itself)."""
        info = self.info(backend)
        return info.get("stands_in_for") or legacy_stand_ins().get(info.get("engine", ""), "")

    def info(self, backend: str) -> dict:
        """The backend's server record's info ({} for a backend without one)."""
        s = self.servers.get(backend)
        return s.info if s is not None else {}

    def comparable(self, backend: str) -> bool:
        """Ranked with the networked servers: False only for † figures (no network, no server)."""
        return self.kind(backend) != "embedded"


def derived(rd: RunData, key: str, make: Callable[[], T]) -> T:
    """A table derived from the run, computed once per RunData: rendering make bench's report computed the
    write table 18 times and the ranking 4 times, ~25 s of its ~45 s (20261128-183514). Kept while the
    frames it may read are the same objects: a view that replaces one of them computes its own."""
    basis = (rd.phases, rd.monitor, rd.ingest, rd.records, rd.servers)
    hit = rd.memo.get(key)
    if hit is None or any(a is not b for a, b in zip(hit[0], basis, strict=True)):
        hit = rd.memo[key] = (basis, make())
    return hit[1]


MARKS = {"server": "", "stand-in": " ‡", "embedded": " †"}


def load_run(path: Path) -> RunData:
    store = RunStore.open(path)
    return from_records(path, store.manifest(), list(store.typed()))


def from_records(path: Path, manifest: dict, lines: list[Record] | list[dict]) -> RunData:
    """The run's frames from its records (a line given as a dict, as a test builds one, is decoded first)."""
    recs = typed(lines)
    rd = RunData(path, manifest, recs)
    rd.servers = {r.backend: r for r in recs if isinstance(r, Server)}
    rd.errors = [r for r in recs if isinstance(r, BackendError)]
    rd.skipped = [r for r in recs if isinstance(r, PhaseSkipped)]
    rd.phases, rd.superseded = latest_attempts(phase_table(recs))
    rd.ingest = ingest_table(recs)
    rd.monitor = monitor_table(recs)
    rd.monitor_phases = monitor_phase_table(recs)
    return rd


def typed(lines: list[Record] | list[dict]) -> list[Record]:
    """Records as their kinds' classes; a line given as a dict (a test's, a runner's as_dict) is decoded."""
    return [r if isinstance(r, Record) else decode(r) for r in lines]


def phase_table(lines: list[Record] | list[dict]) -> pd.DataFrame:
    recs = typed(lines)
    starts = {r.phase: r for r in recs if isinstance(r, PhaseStart)}
    ends = {r.phase: r for r in recs if isinstance(r, PhaseEnd)}
    disturbed = {r.phase: r for r in recs if isinstance(r, Disturbance)}
    groups: dict[tuple[str, str], list[Interval]] = {}
    for r in recs:
        if isinstance(r, Interval):
            groups.setdefault((r.phase, r.kind), []).append(r)
    origin = run_origin(recs)
    rows = []
    for phase, st in starts.items():
        end = ends.get(phase)
        kinds = sorted({k for (p, k) in groups if p == phase}) or [None]
        for kind in kinds:
            ivs = groups.get((phase, kind), [])
            s = merged_summary([r.hist for r in ivs])
            errors: dict[str, int] = {}
            for r in ivs:
                for k, v in r.errors.items():
                    errors[k] = errors.get(k, 0) + v
            wall = end.wall_s if end else (max((r.ts for r in ivs), default=st.ts) - st.ts)
            ok = sum(r.ops for r in ivs)
            n_err, n_to = sum(errors.values()), sum(r.timeouts for r in ivs)
            checked = sum(r.checked for r in ivs)
            extra: dict[str, int] = {}  # kind-specific counters: summed, or the largest for *_max
            for r in ivs:
                for k, v in (r.extra or {}).items():
                    extra[k] = max(extra.get(k, 0), v) if k.endswith("_max") else extra.get(k, 0) + v
            longest = longest_op(ivs, st, end, origin)  # the histogram's maximum is within its 0.1%
            rows.append({
                    "phase": phase, "backend": st.backend, "scenario": st.scenario, "kind": kind,
                    "mode": st.mode, "concurrency": st.concurrency, "repeat": st.repeat,
                    "attempt": recorded_or(st.attempt, 0),
                    "foreign_cpu": recorded_or(
                        getattr(disturbed.get(phase), "foreign_cpu", None), float("nan")),
                    "steal": recorded_or(getattr(disturbed.get(phase), "steal", None), float("nan")),
                    "disturbed": bool(getattr(disturbed.get(phase), "disturbed", False)),
                    "consistency": st.consistency or "",
                    "target_rate": st.stages[-1][0] if st.stages else None,
                    "churn_rate": st.churn_rate,  # changes/s of a churn step (None elsewhere)
                    "status": end.status if end else "incomplete",
                    "reason": (end.reason if end else None)
                    or ("" if end else "run ended before this phase finished"), "ops": ok, "errors": n_err,
                    "timeouts": n_to, "error_types": errors, "attempted": ok + n_err + n_to,
                    "mean_ms": s.mean_ms, "p50_ms": s.p50_ms, "p95_ms": s.p95_ms, "p99_ms": s.p99_ms,
                    "p999_ms": s.p999_ms, "min_ms": s.min_ms, **longest,  # max_ms: as timed where recorded
                    "max_ms": s.max_ms if math.isnan(longest["longest_ms"]) else longest["longest_ms"],
                    "ops_per_s": ok / wall if wall and wall > 0 else float("nan"), "wall_s": wall,
                    "checked": checked, "mismatches": sum(r.mismatches for r in ivs),
                    "examples": [e for r in ivs for e in r.examples][:5],
                    "results": sum(r.results for r in ivs), "duplicates": sum(r.duplicates for r in ivs),
                    "late": sum(r.late for r in ivs), "warmup_ops": (end.warmup_ops if end else 0),
                    "scheduled": (end.scheduled if end else None), "dropped": (end.dropped if end else 0),
                    "hists": [r.hist for r in ivs], "extra": extra,
                    # per interval: seconds after the phase start and ops, for the interval-to-interval spread
                    "iv_t": [recorded_or(r.ts, 0.0) - recorded_or(st.ts, 0.0) for r in ivs],
                    "iv_ops": [r.ops for r in ivs], "budget_s": st.budget_s, "min_ops": st.min_ops,
                    "iterations": st.iterations})
    return pd.DataFrame(rows)


def run_origin(recs: list[Record]) -> float | None:
    """The run's first record's wall time: what "seconds into the run" counts from (None: no time stamped)."""
    return min((r.ts for r in recs if r.ts is not None), default=None)


NOT_RECORDED = {"longest_ms": float("nan"), "longest_phase_s": float("nan"), "longest_run_s": float("nan")}


def longest_op(ivs: list[Interval], st: PhaseStart, end: PhaseEnd | None, origin: float | None) -> dict:
    """The phase's longest answered op (ms, as the worker timed it) and when it began: seconds from the
    measured window's origin, and from the run's first record. NaN where a run did not record it (before issue
    70, or a kind not timed through OpCounters.add): never taken from elsewhere. The histogram's maximum is
    its length too, within its 0.1% resolution, but not its time."""
    timed = [r for r in ivs if r.ops]
    if not timed or any(r.longest_us is None for r in timed):
        return dict(NOT_RECORDED)
    top = max(timed, key=lambda r: r.longest_us or 0)
    at = float(top.longest_at_s or 0.0)
    window = end.window_start_s if end is not None else None
    # the phase's start in the run, its window's origin in the phase, the op in the window
    run_s = st.ts - origin + window + at if None not in (window, st.ts, origin) else float("nan")
    return {"longest_ms": (top.longest_us or 0) / 1000, "longest_phase_s": at, "longest_run_s": run_s}


def recorded_or(value, default):
    """A record's optional field, `default` where it was not recorded (None)."""
    return default if value is None else value


# churn_rate: a churn sweep's steps share every other key, so without it a re-run step replaced the others
PHASE_KEY = [
    "backend", "scenario", "consistency", "mode", "concurrency", "target_rate", "churn_rate", "repeat"]


def latest_attempts(ph: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the last attempt of every phase, the attempts it replaced)."""
    if ph.empty:
        return ph, ph
    last = ph.groupby(PHASE_KEY, dropna=False, sort=False)["attempt"].transform("max")
    keep = ph["attempt"] == last
    return ph[keep].reset_index(drop=True), ph[~keep].reset_index(drop=True)


def ingest_rates(rec: dict) -> dict:
    """A load's notes as shown: each rate a backend names (`notes["rates"]`: name -> [count, seconds],
    each a key of the notes or of the ingest record, e.g. ["documents", "insert_seconds"]) computed here,
    in its place, as whole units per second; other durations to the millisecond. Backends report only raw
    counts and durations, so every rate of the report is computed in this one place."""
    notes = rec.get("notes") or {}
    out: dict = {}
    for k, v in notes.items():
        if k != "rates":
            out[k] = round(v, 3) if isinstance(v, float) else v
            continue
        for name, (count_key, seconds_key) in v.items():
            count, secs = (
                notes.get(count_key, rec.get(count_key)), notes.get(seconds_key, rec.get(seconds_key)))
            out[name] = round(count / secs) if count is not None and secs else None
    return out


def ingest_table(lines: list[Record] | list[dict]) -> pd.DataFrame:
    rows = []
    for rec in typed(lines):
        # a load's notes name the counts and durations its rates rest on by field name (ingest_rates), so the
        # row is built from the record's fields by name; a skipped load shows the load it reused
        if isinstance(rec, IngestSkipped) and rec.previous:
            r = {**rec.previous, "reused_from_previous_prepare": True}
        elif isinstance(rec, Ingest):
            r = as_dict(rec)
        else:
            continue
        b = np.array(r.get("batch_seconds") or [], dtype=float)
        b = b[np.isfinite(b)]  # a load through one bulk call times no batches: NaN, without numpy's warning
        total_s = r["load_seconds"] + (r.get("build_seconds") or 0.0)
        rows.append(
            {
                "backend": r["backend"], "variant": r.get("variant") or "",
                "relationships": r["relationships"], "acl_relationships": r["acl_relationships"],
                "rows": r["rows"],
                "rows_per_s": r["rows"] / r["load_seconds"] if r["load_seconds"] else float("nan"),
                "documents": r.get("documents"), "load_s": r["load_seconds"],
                "build_s": r.get("build_seconds") or 0.0,
                "build_what": (r.get("build") or {}).get("what", ""), "total_s": total_s,
                "rels_per_s": r["relationships"] / total_s if total_s else float("nan"),
                "load_rels_per_s": r["relationships"] / r["load_seconds"]
                if r["load_seconds"]
                else float("nan"),
                # a load in one bulk call timed no batches: "—", not 0
                "batch_rows": r.get("batch_rows"), "batches": b.size or None,
                "batch_mean_s": float(b.mean()) if b.size else float("nan"),
                "batch_p95_s": float(np.percentile(b, 95)) if b.size else float("nan"),
                "footprint_bytes": r.get("footprint_bytes"), "notes": ingest_rates(r),
                # what the load path wrote (SSTable files, request bodies): a backend's notes, when it says
                "bytes_written": (r.get("notes") or {}).get("bytes_written"),
                "start_s": r.get("start_seconds"), "reused": bool(r.get("reused_from_previous_prepare"))})
    df = pd.DataFrame(rows)
    return df.drop_duplicates(["backend", "variant"], keep="last") if not df.empty else df


def server_memory(r: Monitor) -> int:
    """A monitor sample's server memory: PSS where it was read (native servers since it was), else RSS (older
    runs) or the containers' memory usage (compose)."""
    return r.pss_bytes or r.rss_bytes


def monitor_phase_table(recs: list[Record]) -> pd.DataFrame:
    """Per monitored phase: server CPU mean, memory max (server_memory), and the client processes' CPU mean
    when recorded."""
    rows = [{"backend": r.backend, "phase": r.phase, "cpu": r.cpu_percent, "rss": server_memory(r),
             "client_cpu": recorded_or(r.client_cpu_percent, float("nan"))}
            for r in recs
            if isinstance(r, Monitor)]
    if not rows:
        return pd.DataFrame(
            columns=["backend", "phase", "cpu_mean", "rss_max_mb", "client_cpu_mean", "samples"])
    g = pd.DataFrame(rows).groupby(["backend", "phase"], sort=False)
    out = g.agg(cpu_mean=("cpu", "mean"), rss_max=("rss", "max"), client_cpu_mean=("client_cpu", "mean"),
                samples=("cpu", "size")).reset_index()
    out["rss_max_mb"] = out.pop("rss_max") / 2**20
    return out


def monitor_table(recs: list[Record]) -> pd.DataFrame:
    rows = [{"backend": r.backend, "phase": r.phase, "cpu": r.cpu_percent, "rss": server_memory(r)}
            for r in recs if isinstance(r, Monitor)]
    if not rows:
        return pd.DataFrame(columns=["backend", "stage", "cpu_mean", "cpu_min", "cpu_max", "rss_mean_mb",
                                     "rss_min_mb", "rss_max_mb", "samples"])
    df = pd.DataFrame(rows)
    df["stage"] = df["phase"].str.split("/").str[1]
    g = df.groupby(["backend", "stage"], sort=False)
    out = g.agg(cpu_mean=("cpu", "mean"), cpu_min=("cpu", "min"), cpu_max=("cpu", "max"),
                rss_mean_mb=("rss", "mean"), rss_min_mb=("rss", "min"), rss_max_mb=("rss", "max"),
                samples=("cpu", "size")).reset_index()
    for c in ("rss_mean_mb", "rss_min_mb", "rss_max_mb"):
        out[c] = out[c] / 2**20
    return out


def merged_summary(hists: list[str]):
    """Count, mean and percentiles of the ops of these histograms pooled: the report's one function for a
    percentile over ops (figures.cell takes the median of its rounds' figures from it; the load-host, write
    and size-sweep tables pool with it), through core/metrics.py's percentile."""
    return _merged_summary(tuple(hists))


@lru_cache(maxsize=8192)
def _merged_summary(hists: tuple[str, ...]):
    # The same phases are summarized by several sections (tables, findings, reference); hdrh's mean
    # walks every bucket in Python (~0.1 s per histogram), so each merge is computed once.
    return summarize(merge(hists))


def cv(values: list[float]) -> float:
    v = np.array([x for x in values if not math.isnan(x)], dtype=float)
    if len(v) < 2 or v.mean() == 0:
        return float("nan")
    return float(v.std(ddof=1) / v.mean())


def sweep_runs(rd: RunData) -> list[RunData]:
    """Every run of the sweep this run belongs to, smallest first by relationships (this one included)."""
    runs = named_runs(rd, (rd.manifest.get("sweep") or {}).get("runs") or [])
    return sorted(runs, key=lambda r: (r.manifest.get("dataset") or {}).get("relationships", 0))


def named_runs(rd: RunData, names: list[str]) -> list[RunData]:
    """The runs of a sweep named in `rd`'s manifest, found beside it (`rd` itself among them), in that
    order."""
    return [rd if n == rd.path.name else load_run(rd.path.parent / n) for n in names
            if n == rd.path.name or (rd.path.parent / n).is_dir()]
