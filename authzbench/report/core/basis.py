"""A run's cost basis for capacity projections: per backend, server core-seconds per check, lookup and write
(one figure per round), peak server RSS per round and the footprint on disk, at the run's dataset size.

Server CPU is the monitor's: the measured server's processes (SpiceDB and its PostgreSQL together), never
the client's. A phase's core-seconds are its mean server CPU times its measured wall time.
- checks: the closed-loop check phases of a round pooled (every scenario and worker count): their
  core-seconds over their checks, as the report's "Server CPU per 1,000 checks";
- lookups: the same over the lookup phases (the run's heavy and regular lookups as measured);
- writes: the closed-loop mixed phases of a round, less their checks at that round's check cost, over their
  writes. At 1% writes this is a small difference of large numbers: its rounds say how well it is known.
Open-loop phases run in one round only and are left out, so every figure has its rounds' interval.

The extract is small JSON (`authzbench basis`), committed next to the reports: `authzbench plan` reads it
as it reads a results directory, because results directories (megabytes of histograms) are not committed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from authzbench.core.errors import UserError
from authzbench.core.projection import KINDS, BackendBasis, SizePoint
from authzbench.report.core.data import RunData, load_run
from authzbench.report.core.tables import label
from authzbench.results.store import MANIFEST
from authzbench.workloads.catalog import SCENARIOS

FORMAT = "authzbench-cost-basis/1"


def _core_seconds(j: pd.DataFrame) -> pd.Series:
    return j["cpu_mean"] / 100 * j["wall_s"]


def _phases(rd: RunData, op: str) -> pd.DataFrame:
    """Closed-loop phases of scenarios of this op kind, one row per phase (its kinds' ops as columns), joined
    with the phase's server CPU."""
    ph, m = rd.phases, rd.monitor_phases
    if ph.empty or m.empty:
        return pd.DataFrame()
    names = [n for n, s in SCENARIOS.items() if s.op == op]
    sub = ph[ph["scenario"].isin(names) & (ph["mode"] == "closed") & (ph["consistency"].fillna("") == "")]
    if sub.empty:
        return pd.DataFrame()
    ops = sub.pivot_table(
        index=["backend", "phase"], columns="kind", values="ops", aggfunc="sum", fill_value=0)
    first = sub.drop_duplicates("phase").set_index(["backend", "phase"])[["repeat", "concurrency", "wall_s",
                                                                         "ops_per_s"]]
    j = first.join(ops).reset_index().merge(m, on=["backend", "phase"], how="inner")
    j["core_s"] = _core_seconds(j)
    return j


def _per_round(j: pd.DataFrame, kind: str) -> dict[int, float]:
    out = {}
    for r, g in j.groupby("repeat"):
        n = g[kind].sum() if kind in g else 0
        if n > 0:
            out[int(r)] = float(g["core_s"].sum() / n)
    return out


def _writes(j: pd.DataFrame, check_cost: dict[int, float]) -> dict[int, float]:
    """Per round: the mixed phases' core-seconds less their checks at that round's check cost, per write
    (clipped at 0: a negative difference says the writes' cost is within the checks' noise)."""
    if j.empty or "write" not in j:
        return {}
    fallback = float(pd.Series(list(check_cost.values())).median()) if check_cost else math.nan
    out = {}
    for r, g in j.groupby("repeat"):
        w, c = g["write"].sum(), g["check"].sum() if "check" in g else 0
        cost = check_cost.get(int(r), fallback)
        if w > 0 and (c == 0 or math.isfinite(cost)):
            out[int(r)] = max(0.0, float(g["core_s"].sum() - (c * cost if c else 0.0)) / w)
    return out


def _rss(rd: RunData, backend: str) -> list[float]:
    """Peak server memory (bytes, PSS natively) of each round over its read and mixed phases (never the
    load)."""
    ph, m = rd.phases, rd.monitor_phases
    rounds = ph[ph["backend"] == backend].drop_duplicates("phase")[["phase", "repeat"]]
    j = rounds.merge(m, on="phase", how="inner")
    return [float(g["rss_max_mb"].max() * 2**20) for _, g in j.groupby("repeat")]


def backend_basis(rd: RunData, backend: str, checks: pd.DataFrame, lookups: pd.DataFrame,
                  mixed: pd.DataFrame) -> dict:
    def mine(j: pd.DataFrame) -> pd.DataFrame:
        return j[j["backend"] == backend] if not j.empty else j

    c, lk, mx = mine(checks), mine(lookups), mine(mixed)
    check_cost = _per_round(c, "check") if not c.empty else {}
    cpu = {"check": check_cost, "lookup": _per_round(lk, "lookup") if not lk.empty else {},
           "write": _writes(mx, check_cost)}
    src = {"check": c, "lookup": lk, "write": mx}
    ing = rd.ingest[(rd.ingest["backend"] == backend) & (rd.ingest["variant"] == "")] if not rd.ingest.empty \
        else rd.ingest
    fp = ing["footprint_bytes"].dropna() if not ing.empty else pd.Series(dtype=float)
    return {
        "label": label(rd, backend),
        "cpu_s_per_op": {k: [v for _, v in sorted(cpu[k].items())] for k in KINDS if cpu[k]},
        "ops": {k: int(src[k][k].sum()) for k in KINDS if cpu[k]},
        "concurrency": {k: sorted(int(x) for x in src[k]["concurrency"].unique()) for k in KINDS if cpu[k]},
        "best_check_ops_per_s": float(c["ops_per_s"].max()) if not c.empty else None,
        "rss_bytes": _rss(rd, backend), "disk_bytes": [float(fp.iloc[-1])] if len(fp) else []}


def extract(rd: RunData) -> dict:
    """The run's cost basis as plain JSON-able data."""
    ds = rd.manifest.get("dataset") or {}
    checks, lookups, mixed = _phases(rd, "check"), _phases(rd, "lookup"), _phases(rd, "mixed")
    backends = list(dict.fromkeys(rd.phases["backend"])) if not rd.phases.empty else []
    env = rd.manifest.get("environment") or {}
    return {"format": FORMAT, "run_id": rd.manifest.get("run_id", rd.path.name), "model": ds.get("model"),
            "profile": ds.get("profile"), "relationships": ds.get("relationships"),
            "dataset_hash": ds.get("hash"),
            "machine": f"{env.get('cpu_model', '?')}, {env.get('cpu_logical', '?')} logical cores",
            "backends": {b: backend_basis(rd, b, checks, lookups, mixed) for b in backends}}


def write(run: Path, out_dir: Path) -> Path:
    data = extract(load_run(run))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{data['run_id']}.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def check(source: Path) -> dict | Path:
    """An extract file's basis, or a results directory to extract from; refused in one line when it is
    neither (cheap: a results directory is only read by read())."""
    if source.is_dir():
        if not (source / MANIFEST).is_file():
            raise UserError(f"{source}: not a results directory (no {MANIFEST}) nor a cost-basis file")
        return source
    if not source.is_file():
        raise UserError(f"{source}: no such results directory or cost-basis file")
    try:
        data = json.loads(source.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{source}: not a cost-basis file ({e.__class__.__name__})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"{source}: not a cost-basis file (expected \"format\": \"{FORMAT}\")")
    return data


def read(checked: dict | Path) -> dict:
    return extract(load_run(checked)) if isinstance(checked, Path) else checked


def combine(extracts: list[dict]) -> dict[str, BackendBasis]:
    """Per backend, one SizePoint per dataset size (runs of one size merged: their rounds together), smallest
    first. Runs of different models are refused: a cost per op is the model's."""
    models = {e.get("model") for e in extracts}
    if len(models) > 1:
        raise UserError(
            f"the runs given are of different models ({', '.join(sorted(map(str, models)))}): a cost "
            "per op belongs to one model")
    by: dict[str, dict[int, SizePoint]] = {}
    labels: dict[str, str] = {}
    for e in extracts:
        for b, f in e["backends"].items():
            labels[b] = f["label"]
            p = by.setdefault(b, {}).setdefault(
                e["relationships"], SizePoint([], e["relationships"], e["profile"]))
            p.runs.append(e["run_id"])
            for k, v in f["cpu_s_per_op"].items():
                p.cpu.setdefault(k, []).extend(v)
                p.ops[k] = p.ops.get(k, 0) + f["ops"][k]
                p.concurrency[k] = sorted(set(p.concurrency.get(k, [])) | set(f["concurrency"][k]))
            if (best := f.get("best_check_ops_per_s")) is not None:
                p.best_ops_per_s = best if math.isnan(p.best_ops_per_s) else max(best, p.best_ops_per_s)
            p.rss.extend(f["rss_bytes"])
            p.disk.extend(f["disk_bytes"])
    return {b: BackendBasis(b, labels[b], [pts[s] for s in sorted(pts)]) for b, pts in by.items()}
