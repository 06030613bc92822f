"""Throughput that is the server's: per closed-loop check phase, the CPU our client (this process and its
workers) and the measured server each spent per op, from the monitor's per-process samples. A throughput
figure whose phases' client used more CPU than the server is client-bound: on a shared machine it measures
our client as much as the server, so it understates the server. The server's capacity per core
(1000 / server CPU ms per check) is the figure that does not depend on the client.

Unknown (None), never False, where the run did not record the client's CPU apart from the server's: runs
from before the monitor split it, and in-process engines (†), whose server CPU is the client's process."""

from __future__ import annotations

import math

import pandas as pd

from authzbench.report.data import RunData
from authzbench.report.figures import best_rate
from authzbench.report.frames import scenarios_measured
from authzbench.report.tables import label, num, table

MARK = "◐"  # a throughput figure that is client-bound
LEGEND = (f"{MARK}: client-bound, the phase's client (our workers) used more CPU than the server (measured), so "
          "the throughput understates the server")


def phase_cpu(rd: RunData) -> pd.DataFrame:
    """Per closed-loop phase with a monitor: ops, wall time, and the client's and the server's core-seconds
    (mean CPU % / 100 x wall time); client_s is NaN where its CPU was not recorded apart."""
    m, ph = rd.monitor_phases, rd.phases
    cols = ["backend", "scenario", "concurrency", "repeat", "ops", "client_s", "server_s", "samples"]
    if m.empty or ph.empty:
        return pd.DataFrame(columns=cols)
    j = ph[(ph["mode"] == "closed") & (ph["ops"] > 0)].merge(m, on=["backend", "phase"], how="inner")
    # a mixed phase has a row per op kind sharing one monitor window: its CPU is counted once, ops summed
    g = j.groupby(["backend", "scenario", "concurrency", "repeat", "phase"], sort=False)
    out = g.agg(ops=("ops", "sum"), wall_s=("wall_s", "max"), cpu=("cpu_mean", "first"),
                client=("client_cpu_mean", "first"), samples=("samples", "first")).reset_index()
    out["server_s"] = out["cpu"] / 100 * out["wall_s"]
    out["client_s"] = out["client"] / 100 * out["wall_s"]
    return out[cols]


def per_op(rd: RunData, backend: str, scenario: str, concurrency: int) -> tuple[float, float] | None:
    """(client, server) CPU ms per op over a figure's rounds; client NaN when unknown; None: no monitor."""
    p = _phases(rd)
    sub = p[(p["backend"] == backend) & (p["scenario"] == scenario) & (p["concurrency"] == int(concurrency))]
    ops = sub["ops"].sum()
    if sub.empty or not ops:
        return None
    client = float(sub["client_s"].sum() / ops * 1000) if sub["client_s"].notna().all() else float("nan")
    return client, float(sub["server_s"].sum() / ops * 1000)


def client_bound(rd: RunData, backend: str, scenario: str, concurrency: int) -> bool | None:
    """True when the client used more CPU than the server over the figure's phases; None when unknown (no
    monitor, no client CPU recorded apart, or an in-process engine whose server CPU is the client's)."""
    cpu = per_op(rd, backend, scenario, concurrency)
    if cpu is None or math.isnan(cpu[0]) or rd.kind(backend) == "embedded":
        return None
    return cpu[0] > cpu[1]


def capacity_per_core(server_ms_per_op: float) -> float:
    """Checks one core of the server answers per second at its measured CPU per check (NaN when unmeasured)."""
    return 1000 / server_ms_per_op if server_ms_per_op > 0 else float("nan")


def _phases(rd: RunData) -> pd.DataFrame:
    """phase_cpu computed once per run: every throughput figure asks for its phases."""
    if "_phase_cpu" not in rd.__dict__:
        rd.__dict__["_phase_cpu"] = phase_cpu(rd)
    return rd.__dict__["_phase_cpu"]


COLUMNS = {"client_ms": "Client CPU ms/op", "server_ms": "Server CPU ms/op"}


def with_cpu(rd: RunData, merged: pd.DataFrame) -> pd.DataFrame:
    """A merged closed-loop phase table (one row per backend and worker count) with the client's and the
    server's CPU ms per op over its rounds (COLUMNS): the per-phase statement beside its latency."""
    out = merged.copy()
    cpu = [per_op(rd, r.backend, r.scenario, int(r.concurrency)) or (math.nan, math.nan) for r in out.itertuples()]
    out["client_ms"] = [_ms(c) for c, _ in cpu]
    out["server_ms"] = [num(s) for _, s in cpu]
    return out


def _samples(rd: RunData, backend: str, scenario: str, concurrency: int) -> int:
    """The monitor samples a figure's CPU rests on (0.5 s apart; a phase of half a second has one or two)."""
    p = _phases(rd)
    return int(p[(p["backend"] == backend) & (p["scenario"] == scenario) & (p["concurrency"] == concurrency)]
               ["samples"].sum())


def _ms(v: float) -> str:
    return "unknown" if math.isnan(v) else num(v)


def _flag_text(flag: bool | None) -> str:
    return "unknown" if flag is None else f"{MARK} yes" if flag else "no"


def best_rows(rd: RunData) -> list[dict]:
    """Per check scenario and backend at its best worker count: checks/s, CPU per op, capacity, flag."""
    rows = []
    for s in scenarios_measured(rd, "check"):
        for b in dict.fromkeys(rd.phases[rd.phases["scenario"] == s]["backend"]):
            best = best_rate(rd, b, s)
            if best is None:
                continue
            c, x = best
            client, server = per_op(rd, b, s, c) or (float("nan"), float("nan"))
            rows.append({"scenario": f"`{s}`", "backend": label(rd, b), "workers": c, "rate": num(x.value),
                         "client_ms": _ms(client), "server_ms": num(server),
                         "capacity": num(capacity_per_core(server)), "samples": _samples(rd, b, s, c),
                         "flag": _flag_text(client_bound(rd, b, s, c))})
    return rows


def sentence(rows: list[dict]) -> str:
    """Which best-throughput figures are client-bound, how many are not, and which are unknown."""
    def names(flag: str) -> list[str]:
        return [f"{r['backend']} ({r['scenario']})" for r in rows if r["flag"] == flag]

    bound, unknown = names(f"{MARK} yes"), names("unknown")
    text = (f"Client-bound, so understating the server: {', '.join(bound) or 'none'}; "
            f"not client-bound: {len(names('no'))} of {len(rows)} figures.")
    if unknown:
        text += (" Unknown (no client CPU recorded apart, or an in-process engine whose server is the client): "
                 f"{', '.join(unknown)}.")
    n = [r["samples"] for r in rows]
    return text + f" Each row's CPU rests on {min(n)} to {max(n)} monitor samples over its rounds."


def pinning(rd: RunData) -> str:
    """Whether the run pinned client and servers to separate cores (--pin, orchestrate.pin_cores), from its
    manifest: a client-bound figure means something else when the two did not share the cores."""
    cores = rd.manifest.get("environment", {}).get("cpu_logical") or "all the"
    if rd.manifest.get("config", {}).get("pin"):
        return (f"Cores pinned (--pin): each native server's processes on the last of {cores} cores, this process "
                "and its workers on the others, so client and server did not take CPU from each other.")
    return f"Cores not pinned: client and servers shared {cores} cores (the run had no --pin)."


def section(rd: RunData) -> str:
    """The appendix's table and sentence: "" when no check phase has a monitor."""
    rows = best_rows(rd)
    if not rows:
        return ""
    return "\n".join(["### Client CPU against server CPU at the best worker count", "",
                      "Per check scenario, each backend at its best worker count: checks/s, the CPU our client "
                      "(this process and its workers) and the server each spent per check (monitor's mean CPU x "
                      "phase wall time / checks, over the rounds), and the server's capacity per core = 1000 / "
                      f"server CPU ms per check. {LEGEND}.", "", f"{sentence(rows)} {pinning(rd)}", "",
                      table(pd.DataFrame(rows), {"scenario": "Scenario", "backend": "Backend", "workers": "Workers",
                                                 "rate": "Checks/s", "client_ms": "Client CPU ms per check",
                                                 "server_ms": "Server CPU ms per check",
                                                 "capacity": "Server checks/s per core",
                                                 "samples": "Monitor samples", "flag": "Client-bound"}),
                      ""])
