"""Throughput that is the server's: per closed-loop check phase, the CPU our client (this process and its
workers) and the measured server each spent per op, from the monitor's per-process samples.

On shared cores a saturated machine's throughput is about cores / (client + server CPU per op): within 3% on
every 8-worker row of the cross-checks 20261129-073812 and -082307 (OpenFGA over gRPC 833/s predicted, 846
measured), so every ms of client CPU is taken from the server. A figure is client-bound when the machine was
saturated (client + server CPU at least SATURATED of the cores) and our client's share of that CPU is at least
SHARE: the throughput is then about (1 - share) x the server-only bound (server cores / server CPU per op),
the rate the server would reach with the cores to itself. With --pin the two did not share cores: client-bound
when the client's cores were saturated, and the server's bound is its one core.

Unknown (None), never False, where the run did not record the client's CPU apart from the server's: runs
from before the monitor split it, and in-process engines (†), whose server CPU is the client's process."""

from __future__ import annotations

import math

import pandas as pd

from authzbench.report.core.data import RunData
from authzbench.report.core.figures import best_rate
from authzbench.report.core.frames import scenarios_measured
from authzbench.report.core.tables import label, num, table

MARK = "◐"  # a throughput figure that is client-bound
# The monitor's client + server CPU over the cores: 0.76-0.97 in every native server's 8-worker check phase of
# 20261129-201802 (its samples miss the monitor itself, the kernel and short-lived processes), 0.43-0.85 at 1
# worker; the cross-checks, which count every process, read 0.97-1.05 at 8 workers.
SATURATED = 0.75
# A quarter of a saturated machine: the figure is then at most 3/4 of the server-only bound, a gap wider than
# any 8-worker ours/tool throughput gap the cross-checks explain otherwise; OpenFGA over HTTP took 46-63%
# there.
SHARE = 0.25
LEGEND = (
    f"{MARK}: client-bound: the machine was saturated (client + server CPU at least {SATURATED:.0%} of its "
    f"cores) and our client (its workers) took at least {SHARE:.0%} of that CPU, so the throughput "
    "understates the server (beside it: the server-only bound, server cores / server CPU per op)")


def judge(client_s: float, server_s: float, wall_s: float, cores: int, pinned: bool = False) -> bool | None:
    """The rule on core-seconds over wall seconds (None when unmeasured): shared cores: client + server at
    least SATURATED of the cores and the client's share at least SHARE; pinned: the client's cores (all but
    one) at least SATURATED busy."""
    if any(math.isnan(v) for v in (client_s, server_s, wall_s)) or wall_s <= 0 or client_s + server_s <= 0:
        return None
    if pinned:
        return client_s / wall_s >= SATURATED * max(cores - 1, 1)
    return (client_s + server_s) / wall_s >= SATURATED * cores and client_s / (client_s + server_s) >= SHARE


def server_only_bound(server_ms_per_op: float, server_cores: float) -> float:
    """Ops/s the server would answer with its cores to itself at its measured CPU per op (NaN when
    unmeasured)."""
    return server_cores * 1000 / server_ms_per_op if server_ms_per_op > 0 else float("nan")


def cores(rd: RunData) -> tuple[int, bool]:
    """The run's logical cores (manifest; 1 when unrecorded) and whether it pinned the servers (--pin)."""
    return int(rd.manifest.get("environment", {}).get("cpu_logical") or 1), bool(rd.manifest.get("config", {})
                                                                                   .get("pin"))


def server_cores(rd: RunData) -> int:
    """The cores the server could use: all of them on shared cores, the last one with --pin."""
    n, pinned = cores(rd)
    return 1 if pinned else n


def phase_cpu(rd: RunData) -> pd.DataFrame:
    """Per closed-loop phase with a monitor: ops, wall time, and the client's and the server's core-seconds
    (mean CPU % / 100 x wall time); client_s is NaN where its CPU was not recorded apart."""
    m, ph = rd.monitor_phases, rd.phases
    cols = [
        "backend", "scenario", "concurrency", "repeat", "ops", "wall_s", "client_s", "server_s", "samples"]
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


def _sums(rd: RunData, backend: str, scenario: str, concurrency: int) -> pd.Series:
    """A figure's ops, wall seconds and client and server core-seconds over its rounds; client NaN if a
    round's is unknown."""
    p = _phases(rd)
    sub = p[(p["backend"] == backend) & (p["scenario"] == scenario) & (p["concurrency"] == int(concurrency))]
    s = sub[["ops", "wall_s", "client_s", "server_s"]].sum()
    if sub["client_s"].isna().any():
        s["client_s"] = math.nan
    return s


def client_bound(rd: RunData, backend: str, scenario: str, concurrency: int) -> bool | None:
    """The rule (judge) over the figure's phases; None when unknown (no monitor, no client CPU recorded apart,
    or an in-process engine whose server CPU is the client's)."""
    s = _sums(rd, backend, scenario, concurrency)
    if rd.kind(backend) == "embedded" or not s["ops"] > 0:
        return None
    return judge(float(s["client_s"]), float(s["server_s"]), float(s["wall_s"]), *cores(rd))


def share(rd: RunData, backend: str, scenario: str, concurrency: int) -> tuple[float, float]:
    """(the machine's busy share: client + server core-seconds / (cores x wall), the client's share of
    them)."""
    s = _sums(rd, backend, scenario, concurrency)
    both = s["client_s"] + s["server_s"]
    busy = both / (s["wall_s"] * cores(rd)[0]) if s["wall_s"] > 0 else math.nan
    return float(busy), float(s["client_s"] / both) if both > 0 else math.nan


def bound(rd: RunData, backend: str, scenario: str, concurrency: int) -> float:
    """The figure's server-only bound, ops/s: server cores / server CPU per op over its rounds."""
    cpu = per_op(rd, backend, scenario, concurrency)
    return math.nan if cpu is None or rd.kind(backend) == "embedded" else server_only_bound(cpu[1],
                                                                                             server_cores(rd))


def capacity_per_core(server_ms_per_op: float) -> float:
    """Checks one core of the server answers per second at its measured CPU per check (NaN when
    unmeasured)."""
    return server_only_bound(server_ms_per_op, 1)


def _phases(rd: RunData) -> pd.DataFrame:
    """phase_cpu computed once per run: every throughput figure asks for its phases."""
    if "_phase_cpu" not in rd.__dict__:
        rd.__dict__["_phase_cpu"] = phase_cpu(rd)
    return rd.__dict__["_phase_cpu"]


COLUMNS = {"client_ms": "Client CPU ms/op", "server_ms": "Server CPU ms/op",
           "client_share": "Client share of busy CPU", "bound": "Server-only bound ops/s"}


def beside_throughput(cols: dict[str, str]) -> dict[str, str]:
    """A phase table's columns with the server-only bound right after its throughput (ops_per_s) and the CPU
    columns at the end."""
    out: dict[str, str] = {}
    for k, v in cols.items():
        out[k] = v
        if k == "ops_per_s":
            out["bound"] = COLUMNS["bound"]
    return {**out, **{k: v for k, v in COLUMNS.items() if k not in out}}


def with_cpu(rd: RunData, merged: pd.DataFrame) -> pd.DataFrame:
    """A merged closed-loop phase table (one row per backend and worker count) with the client's and the
    server's CPU ms per op over its rounds, the client's share of that CPU and the server-only bound beside
    the throughput, ◐ on it when client-bound (COLUMNS): the per-phase statement beside its latency."""
    out = merged.copy()
    keys = [(r.backend, r.scenario, int(r.concurrency)) for r in out.itertuples()]
    cpu = [per_op(rd, *k) or (math.nan, math.nan) for k in keys]
    out["client_ms"] = [_ms(c) for c, _ in cpu]
    out["server_ms"] = [num(s) for _, s in cpu]
    out["client_share"] = [_pct(share(rd, *k)[1]) for k in keys]
    out["bound"] = [_bound_text(rd, *k) for k in keys]
    return out


def _pct(v: float) -> str:
    return "unknown" if math.isnan(v) else f"{v:.0%}"


def _bound_text(rd: RunData, backend: str, scenario: str, concurrency: int) -> str:
    """The server-only bound, with ◐ where the figure beside it is client-bound."""
    b = bound(rd, backend, scenario, concurrency)
    flag = f" {MARK}" if client_bound(rd, backend, scenario, concurrency) else ""
    return "unknown" if math.isnan(b) else num(b) + flag


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
    """Per check scenario and backend at its best worker count: checks/s, CPU per op, the machine's busy share
    and the client's part of it, the server-only bound, flag."""
    rows = []
    for s in scenarios_measured(rd, "check"):
        for b in dict.fromkeys(rd.phases[rd.phases["scenario"] == s]["backend"]):
            best = best_rate(rd, b, s)
            if best is None:
                continue
            c, x = best
            client, server = per_op(rd, b, s, c) or (float("nan"), float("nan"))
            busy, part = share(rd, b, s, c)
            rows.append({"scenario": f"`{s}`", "backend": label(rd, b), "workers": c, "rate": num(x.value),
                         "client_ms": _ms(client), "server_ms": num(server), "busy": _pct(busy),
                         "client_share": _pct(part), "bound": _ms(bound(rd, b, s, c)),
                         "samples": _samples(rd, b, s, c),
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
        text += (
            " Unknown (no client CPU recorded apart, or an in-process engine whose server is the client): "
            f"{', '.join(unknown)}.")
    n = [r["samples"] for r in rows]
    return text + f" Each row's CPU rests on {min(n)} to {max(n)} monitor samples over its rounds."


def pinning(rd: RunData) -> str:
    """Whether the run pinned client and servers to separate cores (--pin, orchestrate.pin_cores), from its
    manifest: a client-bound figure means something else when the two did not share the cores."""
    cores = rd.manifest.get("environment", {}).get("cpu_logical") or "all the"
    if rd.manifest.get("config", {}).get("pin"):
        return (f"Cores pinned (--pin): each native server's processes on the last of {cores} cores, this "
                "process "
                "and its workers on the others, so client and server did not take CPU from each other.")
    return f"Cores not pinned: client and servers shared {cores} cores (the run had no --pin)."


def section(rd: RunData) -> str:
    """The appendix's table and sentence: "" when no check phase has a monitor."""
    rows = best_rows(rd)
    if not rows:
        return ""
    return "\n".join(
        ["### Client CPU against server CPU at the best worker count", "",
         "Per check scenario, each backend at its best worker count: checks/s, the CPU our client "
         "(this process and its workers) and the server each spent per check (monitor's mean CPU x "
         "phase wall time / checks, over the rounds), how busy that kept the machine (client + server "
         "core-seconds / (cores x wall seconds)) and the client's share of it, and the server-only "
         f"bound = {server_cores(rd)} core(s) x 1000 / server CPU ms per check. {LEGEND}.", "",
         f"{sentence(rows)} {pinning(rd)}", "",
         table(pd.DataFrame(rows),
               {"scenario": "Scenario", "backend": "Backend", "workers": "Workers", "rate": "Checks/s",
                "client_ms": "Client CPU ms per check", "server_ms": "Server CPU ms per check",
                "busy": "Machine busy", "client_share": "Client share",
                "bound": "Server-only bound checks/s", "samples": "Monitor samples",
                "flag": "Client-bound"}),
         ""])
