"""The cross-check's report (reports/crosscheck-<run-id>.md), from its records only: per backend, scenario and
worker count, p50, p95 and throughput of ours and of the independent tool, pooled over the rounds (histograms
merged, ops over seconds), the ratio ours / theirs, and the p50 ratio's range over the rounds (each round's
two runs were seconds apart, so its ratio is paired); then where our time goes at 1 worker."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from authzbench.core.metrics import merge
from authzbench.report.core.clientbound import MARK, SATURATED, SHARE, server_only_bound
from authzbench.report.core.fold import fold
from authzbench.tools.crosscheck_bound import (  # noqa: F401 (machine, client_bound: the report's API)
    OUR_SIDES,
    Row,
    Side,
    bound_reason,
    client_bound,
    machine,
)

LIMIT = 1.15  # issue 47: our p50 at 1 worker within 1.15x of the independent tool's
# issue 56: our throughput at the most workers at least this share of the tool's, or flagged
THROUGHPUT_FLOOR = 0.5


def pooled(records: Sequence[dict[str, Any]]) -> Side:
    h = merge(r["hist"] for r in records)
    seconds = sum(r["seconds"] for r in records)
    ops = sum(r["ops"] for r in records)
    return Side(h.get_value_at_percentile(50) / 1000, h.get_value_at_percentile(95) / 1000,
                ops / seconds if seconds else float("nan"), ops, sum(r["errors"] for r in records),
                _cpu(records, "client_cpu_ms"), _cpu(records, "server_cpu_ms"))


def _cpu(records: Sequence[dict[str, Any]], key: str) -> float | None:
    """CPU ms per op over the rounds, weighted by their ops; None unless every round recorded it."""
    if not records or any(r.get(key) is None for r in records):
        return None
    ops = sum(r["ops"] for r in records)
    return sum(r[key] * r["ops"] for r in records) / ops if ops else None


def rows(records: Iterable[dict[str, Any]]) -> list[Row]:
    """One row per (backend, scenario, concurrency) with both sides, in the order first measured."""
    groups: dict[tuple[str, str, int], dict[str, list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list))
    for r in records:
        if r.get("type") == "crosscheck":
            groups[(r["backend"], r["scenario"], r["concurrency"])][r["side"]].append(r)
    out = []
    for (backend, scen, conc), sides in groups.items():
        for side in (s for s in OUR_SIDES if sides[s] and sides["theirs"]):
            ours_by_round = {r["round"]: r["p50_ms"] for r in sides[side]}
            paired = [ours_by_round[r["round"]] / r["p50_ms"] for r in sides["theirs"]
                      if r["round"] in ours_by_round]
            out.append(Row(backend, scen, conc, sides["theirs"][0]["tool"], pooled(sides[side]),
                           pooled(sides["theirs"]), (min(paired), max(paired)) if paired else (float("nan"),
                           float("nan")), len(paired), side))
    return out


def _f(v: float, digits: int = 3) -> str:
    return f"{v:,.{digits}f}"


def ratio_table(table: Sequence[Row]) -> str:
    head = (
        "| backend | scenario | workers | tool | our side | ours p50 ms | theirs p50 ms | p50 ours/theirs "
        "(rounds) | ours p95 ms | theirs p95 ms | p95 ours/theirs | ours checks/s | theirs checks/s | "
        "throughput ours/theirs | errors ours / theirs |")
    lines = [head, "|---|---|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in table:
        lo, hi = r.p50_ratio_range
        lines.append(
            f"| {r.backend} | {r.scenario} | {r.concurrency} | {r.tool} | {OUR_SIDES[r.side]} | "
            f"{_f(r.ours.p50_ms)} | {_f(r.theirs.p50_ms)} | {r.ratio('p50_ms'):.2f} ({lo:.2f}-{hi:.2f}) | "
            f"{_f(r.ours.p95_ms)} | {_f(r.theirs.p95_ms)} | {r.ratio('p95_ms'):.2f} | "
            f"{_f(r.ours.throughput, 0)} | {_f(r.theirs.throughput, 0)} | {r.ratio('throughput'):.2f} | "
            f"{r.ours.errors} / {r.theirs.errors} |")
    return "\n".join(lines) + "\n"


def like_for_like(table: Sequence[Row], workers: int | None = 1) -> list[Row]:
    """The rows (at `workers`, or all) that judge our client against the tool on the tool's own transport:
    ours, or where a backend also has an ours-over-gRPC side (OpenFGA: its adapter speaks HTTP, ghz gRPC),
    that one."""
    some = [r for r in table if workers is None or r.concurrency == workers]
    grpc = {(r.backend, r.scenario, r.concurrency) for r in some if r.side == "ours-grpc"}
    return [r for r in some if (r.side == "ours-grpc") == ((r.backend, r.scenario, r.concurrency) in grpc)]


def verdict(table: Sequence[Row]) -> list[str]:
    """Which 1-worker p50s are within LIMIT of the tool's like for like (like_for_like), which are not; then
    OpenFGA over HTTP, what bench measures, apart."""
    one = like_for_like(table)
    over = [r for r in one if r.ratio("p50_ms") > LIMIT]
    if not one:
        return ["No 1-worker phase was measured."]
    return [*_verdict(one, over), *_http_verdict(table, one)]


def throughput_verdict(table: Sequence[Row], cores: int | None = None) -> list[str]:
    """Per row at its backend's most workers (above 1), like for like (like_for_like), where ours is under
    THROUGHPUT_FLOOR x the tool's throughput: client-bound (MARK, clientbound.judge on the run's `cores`) with
    the measured reason, or why not, or its CPU unrecorded; then the HTTP side's such rows apart. Ends with a
    blank line; [] when no row has more than one worker."""
    most = {r.backend: r.concurrency for r in table}
    for r in table:
        most[r.backend] = max(most[r.backend], r.concurrency)
    top = [r for r in table if r.concurrency == most[r.backend] and r.concurrency > 1]
    like = like_for_like(top, None)
    low = [r for r in like if r.ratio("throughput") < THROUGHPUT_FLOOR]
    if not top:
        return []
    head = (
        f"At the most workers, like for like, our throughput is under {THROUGHPUT_FLOOR:.1f}x the tool's on "
        f"{len(low)} of {len(like)} rows" + (":" if low else "."))
    http = [r for r in top if r not in like and r.ratio("throughput") < THROUGHPUT_FLOOR]
    return [head, *(_low_line(r, cores) for r in low),
            *(["Over HTTP through its SDK, what `bench` measures for it:"] if http else []),
            *(_low_line(r, cores) for r in http), ""]


def _low_line(r: Row, cores: int | None) -> str:
    return (
        f"- {r.backend} {r.scenario} at {r.concurrency} ({OUR_SIDES[r.side]}): {r.ratio('throughput'):.2f}x "
        f"{r.tool}'s; {bound_reason(r, cores)}")


def _http_verdict(table: Sequence[Row], like: Sequence[Row]) -> list[str]:
    """Our HTTP side where the like-for-like verdict took our gRPC one: what bench measures, against ghz."""
    http = [r for r in table if r.concurrency == 1 and r not in like]
    if not http:
        return []
    return ["Over HTTP through its SDK, what `bench` measures for it, against ghz's gRPC, our 1-worker p50 / "
            "ghz's: "
            + ", ".join(f"{r.backend} {r.scenario} {r.ratio('p50_ms'):.2f}" for r in http)
            + ": the transport's and the SDK's cost on top of our client's."]


def _verdict(one: Sequence[Row], over: Sequence[Row]) -> list[str]:
    how = ("each on the tool's own transport (" + ", ".join(sorted({r.backend for r in one
                                                                    if r.side == "ours-grpc"}))
           + ": ours over gRPC, as ghz sends it)") if any(r.side == "ours-grpc" for r in one) else ""
    lead = f"At 1 worker{', ' + how + ',' if how else ''} our p50 is"
    if not over:
        return [f"{lead} within {LIMIT:.2f}x of the independent tool's on all {len(one)} "
                f"(backend, scenario) pairs (highest {max(r.ratio('p50_ms') for r in one):.2f})."]
    return [f"{lead} more than {LIMIT:.2f}x the independent tool's on {len(over)} of {len(one)} "
            "(backend, scenario) pairs: " + ", ".join(f"{r.backend} {r.scenario} {r.ratio('p50_ms'):.2f}"
                                                     for r in over) + "."]


def tool_spread(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str, int], list[float]]:
    """The tool's own p50 per run (round order) for each (backend, scenario, workers): the same tool on the
    same server and inputs, minutes apart."""
    out: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for r in records:
        if r.get("type") == "crosscheck" and r["side"] == "theirs":
            out[(r["backend"], r["scenario"], r["concurrency"])].append(r["p50_ms"])
    return out


def noise_lines(records: Sequence[dict[str, Any]], table: Sequence[Row]) -> list[str]:
    """The tool against itself at 1 worker: its p50's highest run over its lowest. Where that spread passes
    LIMIT, the run cannot tell a LIMIT gap of ours from the host's own noise; a ratio of ours above the spread
    is a gap the noise does not explain. [] without 1-worker rows the tool ran more than once."""
    runs = tool_spread(records)
    spread = {k: max(p) / min(p) for k, p in runs.items() if len(p) > 1}
    one = [r for r in table if r.concurrency == 1 and (r.backend, r.scenario, 1) in spread]
    if not one:
        return []
    lines = ["| backend | scenario | tool | our side | tool p50 ms, run by run | tool's spread (highest / "
             "lowest) | p50 ours/theirs | ours beyond the spread |", "|---|---|---|---|---|--:|--:|---|"]
    for r in one:
        k = (r.backend, r.scenario, 1)
        lines.append(f"| {r.backend} | {r.scenario} | {r.tool} | {OUR_SIDES[r.side]} | "
                     f"{', '.join(_f(v) for v in runs[k])} | {spread[k]:.2f} | {r.ratio('p50_ms'):.2f} | "
                     f"{'yes' if r.ratio('p50_ms') > spread[k] else 'no'} |")
    like = like_for_like(one)
    text = [f"The tool's own spread passes {LIMIT:.2f}x on "
            f"{sum(spread[(r.backend, r.scenario, 1)] > LIMIT for r in like)}"
            f" of {len(like)} pairs."]
    for what, group in (("like for like", like), ("over HTTP", [r for r in one if r not in like])):
        over = [r for r in group if r.ratio("p50_ms") > LIMIT]
        beyond = [f"{r.backend} {r.scenario}" for r in over
                  if r.ratio("p50_ms") > spread[(r.backend, r.scenario, 1)]]
        if group:
            text.append(f"Of the {len(over)} pair{'' if len(over) == 1 else 's'} over {LIMIT:.2f}x {what}, "
                        f"{len(beyond)} " + ("is" if len(beyond) == 1 else "are") + " beyond the tool's own "
                        "spread" + (": " + ", ".join(beyond) if beyond else "") + ".")
    return ["\n".join(lines), "", " ".join(text), ""]


def breakdown_table(records: Iterable[dict[str, Any]], table: Sequence[Row]) -> str:
    """Per backend and scenario at 1 worker: the runner's p50, the adapter's check and the bare driver call
    timed in one process, and the tool's p50; the differences are where our time goes."""
    ones = {(r.backend, r.scenario): r for r in table if r.concurrency == 1 and r.side == "ours"}
    lines = [
        "| backend | scenario | ours (runner) p50 ms | adapter check p50 ms | bare driver call p50 ms | "
        "tool p50 ms | runner - adapter ms | adapter - driver ms | driver - tool ms | driver alone p50 ms | "
        "driver alone - tool ms | driver alone CPU ms per call |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for b in records:
        if b.get("type") != "crosscheck_breakdown" or (b["backend"], b["scenario"]) not in ones:
            continue
        r = ones[(b["backend"], b["scenario"])]
        ours, ad, dr, th = r.ours.p50_ms, b["adapter_p50_ms"], b["driver_p50_ms"], r.theirs.p50_ms
        fl, fc = b.get("floor_p50_ms"), b.get("floor_cpu_ms")
        lines.append(f"| {r.backend} | {r.scenario} | {_f(ours)} | {_f(ad)} | {_f(dr)} | {_f(th)} | "
                     f"{ours - ad:+.3f} | {ad - dr:+.3f} | {dr - th:+.3f} | {_opt(fl)} | "
                     f"{'n/a' if fl is None else f'{fl - th:+.3f}'} | {_opt(fc)} |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def _opt(v: float | None, digits: int = 3) -> str:
    return "n/a" if v is None else _f(v, digits)


def transport_product(records: Iterable[dict[str, Any]]) -> str:
    """The product the transport rows are of: its system's first alias (the name its makers give it)."""
    from authzbench.systems import system

    name = next(r["backend"] for r in records
                if r.get("type") == "crosscheck_breakdown" and r.get("grpc_p50_ms") is not None)
    s = system(name)
    return s.aliases[0] if s.aliases else name


def transport_table(records: Iterable[dict[str, Any]], table: Sequence[Row]) -> str:
    """A backend with a gRPC side at 1 worker: our p50 over its HTTP API (the runner's phase, the adapter
    through the SDK, the bare POST) beside our own gRPC call of the request ghz sends and ghz's p50; bare HTTP
    - our gRPC is the transport's cost, our gRPC - ghz what is left of the client."""
    ones = {(r.backend, r.scenario): r for r in table if r.concurrency == 1 and r.side == "ours"}
    lines = ["| backend | scenario | ours HTTP (runner) p50 ms | adapter HTTP p50 ms | bare HTTP p50 ms | "
             "our gRPC p50 ms | ghz gRPC p50 ms | bare HTTP - our gRPC ms | our gRPC - ghz ms |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for b in records:
        r = ones.get((b.get("backend"), b.get("scenario")))
        if b.get("type") != "crosscheck_breakdown" or b.get("grpc_p50_ms") is None or r is None:
            continue
        g, dr, th = b["grpc_p50_ms"], b["driver_p50_ms"], r.theirs.p50_ms
        lines.append(
            f"| {r.backend} | {r.scenario} | {_f(r.ours.p50_ms)} | {_f(b['adapter_p50_ms'])} | {_f(dr)} | "
            f"{_f(g)} | {_f(th)} | {dr - g:+.3f} | {g - th:+.3f} |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def cpu_table(table: Sequence[Row], cores: int | None = None) -> str:
    """Per row whose runs recorded it: the CPU per measured op of our client, of the tool, and of the server
    under each; how busy our run kept the cores, our client's share, the server-only bound beside our
    throughput, and whether it is client-bound (MARK, clientbound's rule)."""
    lines = ["| backend | scenario | workers | our side | ours client CPU ms/op | tool client CPU ms/op | "
             "client CPU ours/tool | server CPU ms/op, our run | server CPU ms/op, tool's run | machine busy "
             "(ours) | "
             "our client's share | ours checks/s | server-only bound checks/s | client-bound (ours) |",
             "|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in (r for r in table if r.ours.client_cpu_ms is not None):
        oc, tc, os_, ts = (
            r.ours.client_cpu_ms, r.theirs.client_cpu_ms, r.ours.server_cpu_ms, r.theirs.server_cpu_ms)
        ratio = f"{oc / tc:.2f}" if tc else "n/a"
        flag = client_bound(r.ours, cores)
        bound = "n/a" if flag is None else f"{MARK} yes" if flag else "no"
        busy, part = machine(r.ours, cores) if cores and os_ is not None else (None, None)
        cap = server_only_bound(os_, cores) if cores and os_ else None
        lines.append(
            f"| {r.backend} | {r.scenario} | {r.concurrency} | {OUR_SIDES[r.side]} | {_f(oc, 4)} | "
            f"{_opt(tc, 4)} | {ratio} | {_opt(os_, 4)} | {_opt(ts, 4)} | {_pct(busy)} | {_pct(part)} | "
            f"{_f(r.ours.throughput, 0)} | {_opt(cap, 0)} | {bound} |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0%}"


def cpu_sentence(table: Sequence[Row], cores: int | None = None) -> str:
    """The rule, which rows are client-bound by it, and how our client's CPU compares with the tool's."""
    rows_ = [r for r in table if r.ours.client_cpu_ms is not None and r.theirs.client_cpu_ms]
    bound = [r for r in rows_ if client_bound(r.ours, cores)]
    if not rows_:
        return ""
    ratios = [r.ours.client_cpu_ms / r.theirs.client_cpu_ms for r in rows_]
    names = ", ".join(f"{r.backend} {r.scenario} at {r.concurrency} ({OUR_SIDES[r.side]})" for r in bound)
    return (
        f"Our client spent {min(ratios):.2f}-{max(ratios):.2f}x the tool's CPU per op over {len(rows_)} "
        f"rows. Client-bound ({MARK}: client + server CPU at least {SATURATED:.0%} of the "
        f"{cores or 'unrecorded'} cores, our client at least {SHARE:.0%} of it, so the throughput "
        f"understates the server): {names or 'none'}.")


def floor_notes(records: Iterable[dict[str, Any]], table: Sequence[Row]) -> list[str]:
    """Per 1-worker pair with a measured floor: the floor against the tool's p50, and ours against the
    floor."""
    ones = {(r.backend, r.scenario): r for r in table if r.concurrency == 1 and r.side == "ours"}
    out = []
    for b in records:
        r = ones.get((b.get("backend"), b.get("scenario")))
        if b.get("type") != "crosscheck_breakdown" or r is None or not b.get("floor_p50_ms"):
            continue
        fl = b["floor_p50_ms"]
        out.append(
            f"- {r.backend} {r.scenario}: the driver alone {fl:.3f} ms, {fl / r.theirs.p50_ms:.2f}x "
            f"{r.tool}'s {r.theirs.p50_ms:.3f} ms; ours {r.ours.p50_ms:.3f} ms, {r.ours.p50_ms / fl:.2f}x "
            "the driver alone." + _runner_text(b))
    return [*out, ""] if out else []


def _runner_text(b: dict[str, Any]) -> str:
    """The runner's own cost per op, where the breakdown measured it (tools/runner_cost): what the bench's
    loop adds around any call, the part of ours that is neither the driver nor the adapter."""
    if b.get("runner_us") is None:
        return ""
    return (f" The runner's own loop around a no-op check: +{b['runner_us']:.1f} µs an op "
            f"({b['runner_us'] / 1000 / b['floor_p50_ms'] * 100:.1f}% of the driver alone).")


def closing_notes(records: Iterable[dict[str, Any]], table: Sequence[Row]) -> list[str]:
    """For each 1-worker pair over LIMIT with a breakdown: the gap split into the runner around the call, the
    adapter's own work and the driver against the tool, all from the records."""
    bds = {(b["backend"], b["scenario"]): b for b in records if b.get("type") == "crosscheck_breakdown"}
    out = []
    for r in table:
        b = bds.get((r.backend, r.scenario))
        if r.concurrency != 1 or r.side != "ours" or r.ratio("p50_ms") <= LIMIT or b is None:
            continue
        ours, ad, dr, th = r.ours.p50_ms, b["adapter_p50_ms"], b["driver_p50_ms"], r.theirs.p50_ms
        out.append(
            f"- {r.backend} {r.scenario}: ours {ours:.3f} ms against {r.tool}'s {th:.3f} ms "
            f"({ours - th:+.3f} ms): the runner around the call {ours - ad:+.3f} ms, the adapter's own work "
            f"{ad - dr:+.3f} ms, the driver's call against {r.tool}'s {dr - th:+.3f} ms.")
    return out


def _order(records: Sequence[dict[str, Any]]) -> str:
    """Which side ran first in each round, per backend, as recorded (runs before the alternation always ran
    the tool first)."""
    first: dict[str, dict[int, str]] = {}
    for r in records:
        if r.get("type") == "crosscheck" and r.get("phase"):
            first.setdefault(r["backend"], {}).setdefault(
                r["round"], "the tool" if r["side"] == "theirs" else "ours")
    return "; ".join(f"{b}: " + ", ".join(f"round {k} {v}" for k, v in sorted(rounds.items())) + " first"
                     for b, rounds in first.items()) or "no run recorded"


def _context(manifest: dict[str, Any], records: Sequence[dict[str, Any]]) -> list[str]:
    cfg, env, ds = manifest.get("config", {}), manifest.get("environment", {}), manifest.get("dataset", {})
    also = (f", with the backends measured again in {'; '.join(manifest['also'])}" if manifest.get("also")
            else "")
    out = [f"Run `{manifest.get('run_id')}`{also}, {env.get('captured_at', '')}; {env.get('cpu_logical')} "
           "logical CPUs "
           f"({env.get('cpu_model', '')}), shared by client, tool and server; {env.get('os', '')}.",
           f"Dataset rebac `{ds.get('profile')}`, {ds.get('relationships', 0):,} relationships, hash "
           f"`{str(ds.get('hash', ''))[:16]}`.",
           f"Each phase is the suite's own (phase_plan.phase_specs; its warm-up, budget and inputs) at "
           f"{cfg.get('seconds')} s, in rounds; in each round the tool and the runner's phase "
           f"ran one after the other on the phase's inputs, on the same server ({_order(records)})."]
    for s in (r for r in records if r.get("type") == "crosscheck_server"):
        cmd = next((r["command"] for r in records if r.get("type") == "crosscheck"
                    and r["backend"] == s["backend"] and r["side"] == "theirs"), "")
        out.append(
            f"{s['backend']}: {s['label']} ({s['mode']}), consistency {s.get('consistency') or 'n/a'}; "
            f"ours: {s.get('client', '')}; {s['tool']} {s['tool_version']}: `{cmd}`")
    out += [*_tier_lines(manifest, records), *_load_lines(manifest, records), *_warmup_lines(records),
            _commit_line(env)]
    out += [f"{r['backend']}: FAILED: {r['message']}" for r in records if r.get("type") == "backend_error"]
    return out


def _tier_lines(manifest: dict[str, Any], records: Sequence[dict[str, Any]]) -> list[str]:
    """The tier asked for (the manifest's config; runs before --tier: cached, the only one they had) and each
    engine's cache and consistency as its deployment recorded them."""
    tier = manifest.get("config", {}).get("tier") or "not recorded (runs before --tier ran cached)"
    out = [f"Tier: {tier}."]
    for s in (r for r in records if r.get("type") == "crosscheck_server" and r.get("settings")):
        st = s["settings"]
        out.append(f"{s['backend']} in the {st.get('tier')} tier: answer cache {st.get('cache')}; reads "
                   f"{st.get('reads')}, freshness {st.get('freshness')}.")
    return out


def _load_lines(manifest: dict[str, Any], records: Sequence[dict[str, Any]]) -> list[str]:
    """The 1-minute load average before the first server started and over the runs; a warning when the run
    started on a machine busier than its cores (issue 56: the first cross-check ran at 18-35 on 2 cores)."""
    out = []
    cores = manifest.get("environment", {}).get("cpu_logical")
    first = next((r["load"] for r in records if r.get("type") == "crosscheck" and r.get("load")), None)
    # Runs before load_at_start was recorded: the first run's load is the nearest fact to the start.
    start, when = ((manifest["load_at_start"], "the start") if manifest.get("load_at_start")
                   else (first, "the first run"))
    if start:
        out.append(f"1-minute load average at {when}: {start[0]:.2f} on {cores or 'unknown'} logical CPUs.")
        if cores and start[0] > cores:
            out.append(f"WARNING: the run started with a 1-minute load average of {start[0]:.2f}, above the "
                       f"{cores} cores: other work shared the CPU with both sides, and its figures are not a "
                       "quiet machine's.")
    loads = [r["load"][0] for r in records if r.get("type") == "crosscheck" and r.get("load")]
    if loads:
        out.append(f"1-minute load average over the runs: median {statistics.median(loads):.2f}, "
                   f"range {min(loads):.2f}-{max(loads):.2f}.")
    return out


def _warmup_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """The warm-up each phase gave both sides, from the records (older runs did not record it)."""
    counts = sorted(
        {r["warmup"] for r in records if r.get("type") == "crosscheck" and r.get("warmup") is not None})
    if not counts:
        return []
    return [
        f"Warm-up: every phase, on both sides, ran {', '.join(f'{c:,}' for c in counts)} unmeasured ops "
        "before its measured window (the runner's warm-up; pgbench a run of that many transactions spread "
        "over its clients, ghz a run of that many requests, at least one per connection)."]


def _commit_line(env: dict[str, Any]) -> str:
    src = env.get("source") or {}
    commit = src.get("commit") or "unknown (not recorded)"
    dirty = {True: ", with uncommitted changes", False: ", clean"}.get(src.get("dirty"), "")
    return f"Code: commit `{commit}`{dirty}."


def render(manifest: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
    table, cores = rows(records), manifest.get("environment", {}).get("cpu_logical")
    parts = ["# Cross-check: the suite's client against independent load tools", "",
             *(f"- {c}" for c in _context(manifest, records)), "",
             "Ratios are ours / theirs: above 1 for latency, below 1 for throughput, means ours is slower. "
             "p50 and p95 pool every round's latencies; throughput is ops over measured seconds.", "",
             ratio_table(table), *verdict(table), "", *throughput_verdict(table, cores)]
    if noise := noise_lines(records, table):
        parts += [
            "## The tool against itself at 1 worker", "",
            "The same tool on the same server and inputs, run against run (each round's run, minutes apart, "
            "and any re-run): how far this host moves a p50 on its own. A ratio of ours within that spread "
            "is not told apart from the host's noise by this run.", "", *noise]
    if ct := cpu_table(table, cores):
        parts += [
            "## The client's CPU per op", "",
            "CPU time per measured op, pooled over the rounds: ours over the runner's measured window (this "
            "process, the forkserver and the workers), the tool's over its runs (its processes, its warm-up "
            "run included); the server's over the same span (its processes and the connections' backends "
            "they reaped; native deployments only).",
            "", cpu_sentence(table, cores), "", ct]
    bd = breakdown_table(records, table)
    if bd:
        parts += [
            "## Where our time goes at 1 worker", "",
            "The adapter's check and the bare driver call (the same query or request, prebuilt, on the "
            "adapter's connection) timed call by call alternately in one process on the phase's inputs, "
            "after "
            "every phase: an engine with an answer cache may answer them from it, the runner's phases may "
            "not have. Then the bare driver call alone, the same calls one after another in a tight loop "
            '("driver alone", with this process\'s CPU per call): the floor a Python client on this driver '
            "does not pass.", "", bd, *floor_notes(records, table)]
        if tt := transport_table(records, table):
            product = transport_product(records)
            parts += [
                f"## {product} over HTTP and over gRPC at 1 worker", "",
                f"Our adapter calls {product}'s HTTP API (what its SDKs use), ghz its gRPC API: our own gRPC "
                "call of the same prebuilt request (message classes from the server's reflection), timed in "
                "turn with the breakdown's calls, separates the transport's cost from the client's.", "", tt]
        if gaps := closing_notes(records, table):
            parts += [
                f"Where our 1-worker p50 is over {LIMIT:.2f}x the tool's, the gap splits as follows (p50s "
                "of different samples: their differences are indicative, not exact):",
                "", *gaps, ""]
    return fold("\n".join(parts)).rstrip() + "\n"  # no line over 400 characters (five reached 453-561)


def read_run(run: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run's manifest and records: results/crosscheck/<run-id>, or a committed copy whose records are
    gzipped (records.jsonl.gz)."""
    from authzbench.results.store import RunStore

    store = RunStore.open(run)  # reads records.jsonl.gz where records.jsonl is absent
    return store.manifest(), list(store.records())


def render_run(run: Path | Sequence[Path], report_dir: Path) -> Path:
    """The report of a run, or of several: a later run's records of a backend replace an earlier run's (a
    backend measured again); the first run's manifest and id, the other runs named."""
    runs = [run] if isinstance(run, Path) else list(run)
    manifest, records = read_run(runs[0])
    for more in runs[1:]:
        m, recs = read_run(more)
        again = {r["backend"] for r in recs if r.get("type") in ("crosscheck", "backend_error")}
        manifest = {**manifest, "also": [*manifest.get("also", []), f"{m.get('run_id') or more.name} "
                                         f"({', '.join(sorted(again))})"]}
        records = [r for r in records if r.get("backend") not in again] + recs
    report_dir.mkdir(parents=True, exist_ok=True)
    path = report_dir / f"crosscheck-{manifest.get('run_id') or runs[0].name}.md"
    path.write_text(render(manifest, records))
    return path
