"""`authzbench report --compare A B`: does run B confirm run A?

Per Findings figure: the ratio B / A and whether the two runs differ beyond both figures' intervals; per
verdict of A (two backends clearly apart in a dimension, both intervals measured), whether B confirms it,
finds no clear difference, or reverses it. Then the two machines' speed indexes (report/speed.py), how much
of the figures' drift the normalization (report/transfer.py) explains, which kinds of figure transfer between
the machines, and the ratio B / A of every per-phase figure, raw and normalized."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from authzbench.report import dimensions
from authzbench.report.core import ranking
from authzbench.report.core.data import RunData, load_run
from authzbench.report.core.figures import assumed, clearly_better, with_cells
from authzbench.report.core.noise import overlap
from authzbench.report.core.speed import speed_index
from authzbench.report.core.tables import merge_repeats, table
from authzbench.report.core.transfer import Scales, how, scale_for, scales

AGREE = 1.25  # two runs' figures "agree" when neither is more than 25% above the other
# Figures in these units scale with the machine's speed and are normalized by the index; memory, bytes and
# counts and rates of counts (stale allows per 1,000 revocations) are not: a faster machine does not use less
# memory.
TIMED_UNITS = frozenset({"ms", "checks/s", "ops/s", "relationships/s", "core-seconds"})


def render_compare(a: Path, b: Path, out_dir: Path) -> Path:
    ra, rb = load_run(a), load_run(b)
    lines = [f"# authzbench comparison — A `{ra.manifest['run_id']}` vs B `{rb.manifest['run_id']}`", "",
             "Ratios are B / A (B = the second run). Below 1 means B is faster for latency, and lower for "
             "throughput.", ""]
    lines += verdict_section(ra, rb)
    lines += speed_section(ra, rb)
    s = scales(ra, rb)
    if not ra.phases.empty and not rb.phases.empty:
        lines += _reads_table(ra, rb, s)
    if not ra.ingest.empty and not rb.ingest.empty:
        lines += _ingest_table(ra, rb, s)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"compare-{ra.manifest['run_id']}-vs-{rb.manifest['run_id']}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _reads_table(ra: RunData, rb: RunData, s: Scales | None) -> list[str]:
    both = _per_phase(ra).merge(_per_phase(rb), on=["backend", "scenario", "kind", "concurrency"],
                                suffixes=("_a", "_b"), how="inner")
    for col in ("p50_ms", "p95_ms", "p99_ms", "ops_per_s"):
        both[f"{col}_ratio"] = both[f"{col}_b"] / both[f"{col}_a"]
    cols = {"backend": "Backend", "scenario": "Scenario", "kind": "Op", "concurrency": "Workers",
            "ops_a": "Ops A", "ops_b": "Ops B", "p50_ms_a": "p50 A (ms)", "p50_ms_b": "p50 B (ms)",
            "p50_ms_ratio": "p50 B/A", "p95_ms_ratio": "p95 B/A", "p99_ms_ratio": "p99 B/A",
            "ops_per_s_ratio": "ops/s B/A"}
    k = both["backend"].map(lambda b: scale_for(s, b, "ms")).astype(float)
    if k.notna().any():
        both["p50_norm"] = normalized(both["p50_ms_ratio"], k, higher_is_better=False)
        both["p95_norm"] = normalized(both["p95_ms_ratio"], k, higher_is_better=False)
        both["ops_norm"] = normalized(both["ops_per_s_ratio"], k, higher_is_better=True)
        cols = {**cols, "p50_norm": "p50 B/A normalized", "p95_norm": "p95 B/A normalized",
                "ops_norm": "ops/s B/A normalized"}
    return ["## Reads", "", table(both, {**cols, "mismatches_b": "Mismatches B"})]


def _ingest_table(ra: RunData, rb: RunData, s: Scales | None) -> list[str]:
    ing = ra.ingest.merge(rb.ingest, on=["backend", "variant"], suffixes=("_a", "_b"), how="inner")
    ing["backend"] = [
        b + (f" via {v}" if v else "") for b, v in zip(ing["backend"], ing["variant"], strict=True)]
    ing["rate_ratio"] = ing["rels_per_s_b"] / ing["rels_per_s_a"]
    ing["build_ratio"] = ing["build_s_b"] / ing["build_s_a"].where(ing["build_s_a"] > 0)
    cols = {"backend": "Backend", "rels_per_s_a": "rels/s A", "rels_per_s_b": "rels/s B",
            "rate_ratio": "rels/s B/A"}
    if (k := scale_for(s, "", "relationships/s")) is not None:
        ing["rate_norm"] = normalized(ing["rate_ratio"], k, higher_is_better=True)
        cols["rate_norm"] = "rels/s B/A normalized"
    return ["## Ingest", "", table(ing, {**cols, "build_ratio": "build time B/A"})]


def speed_ratio(ra: RunData, rb: RunData) -> float | None:
    """B's machine-speed index over A's (medians over the visits); None when either run lacks it."""
    sa, sb = speed_index(ra), speed_index(rb)
    return sb.median / sa.median if sa and sb and sa.median > 0 else None


def normalized(ratio, k, higher_is_better: bool):
    """A B / A ratio with the machines' speed taken out: on a machine k times faster a latency is expected
    k times shorter and a throughput k times higher, so a ratio equal to that expectation becomes 1."""
    return ratio / k if higher_is_better else ratio * k


def _with_norm(f: pd.DataFrame, s: Scales | None) -> pd.DataFrame:
    """Figure pairs with their normalized ratio (NaN where nothing scales the figure)."""
    k = [scale_for(s, b, u) for b, u in zip(f["backend"], f["unit"], strict=True)]
    return f.assign(norm=[normalized(r, x, h) if x else float("nan")
                          for r, x, h in zip(f["ratio"], k, f["higher"], strict=True)])


def _drift(ratios: pd.Series) -> tuple[float, float]:
    """(share within AGREE of 1, median |ln ratio|) of some B / A ratios."""
    r = ratios[(ratios > 0) & np.isfinite(ratios)]
    if r.empty:
        return float("nan"), float("nan")
    return float(((r <= AGREE) & (r >= 1 / AGREE)).mean()), float(np.abs(np.log(r)).median())


def drift_table(ra: RunData, rb: RunData) -> pd.DataFrame:
    """How far the figures moved between the runs, raw and normalized (report/transfer.py): per group of
    figures, the share within ±25% and the median |ln B/A| (0 = identical)."""
    s, f = scales(ra, rb), figure_pairs(ra, rb)
    if s is None or f.empty:
        return pd.DataFrame()
    f = _with_norm(f[f["timed"]], s)
    rows = []
    for what, g in (("p50, throughput and ingest figures", f[f["headline"]]),
                    ("every timed Findings figure (latency, throughput, ingest, CPU per op)", f)):
        (agree_raw, log_raw), (agree_norm, log_norm) = _drift(g["ratio"]), _drift(g["norm"])
        rows.append({"what": what, "n": len(g), "agree_raw": agree_raw, "agree_norm": agree_norm,
                     "log_raw": log_raw, "log_norm": log_norm})
    return pd.DataFrame(rows)


def speed_section(ra: RunData, rb: RunData) -> list[str]:
    sa, sb = speed_index(ra), speed_index(rb)
    lines = ["## Machine speed", ""]
    for run, si in (("A", sa), ("B", sb)):
        lines.append(f"- {run}: machine-speed index "
                     + (f"**{si.median:.2f}** (range {si.lo:.2f}-{si.hi:.2f} over {si.n} visits)"
                        if si
                        else "not recorded (a run from before the index)"))
    if (k := speed_ratio(ra, rb)) is not None:
        lines.append(f"- B's machine ran the reference workload at **{k:.2f}x** A's speed.")
    if (s := scales(ra, rb)) is None:
        return [
            *lines, "- Ratios below are raw: neither a `roundtrip` phase nor both indexes to normalize by.",
            ""]
    lines += [f"- {how(s)} A normalized ratio of 1 is a figure that moved only as much as its host did.", ""]
    d = drift_table(ra, rb)
    if d.empty:
        return lines
    d = d.assign(
        agree_raw=d["agree_raw"].map("{:.0%}".format), agree_norm=d["agree_norm"].map("{:.0%}".format))
    return [*lines, "How much of the drift between the runs the normalization explains:", "",
            table(d, {"what": "Figures", "n": "N", "agree_raw": "Within ±25% raw",
                      "agree_norm": "Within ±25% normalized", "log_raw": "Median abs ln(B/A) raw",
                      "log_norm": "Median abs ln(B/A) normalized"}, 3), "", *transfer_section(ra, rb)]


def transfer_table(ra: RunData, rb: RunData) -> pd.DataFrame:
    """Per kind of timed figure (its Findings title before the scenario), how many of its figures are within
    ±25% raw and normalized, and whether it transfers: most of its figures within ±25% once normalized."""
    s, f = scales(ra, rb), figure_pairs(ra, rb)
    if s is None or f.empty:
        return pd.DataFrame()
    f = _with_norm(f[f["timed"]], s)
    # the title before its scenario: "Best throughput over 1, 8 workers, check_negative" -> "Best throughput
    # over 1, 8 workers" (split at the first comma, it read "Best throughput over 1")
    f = f.assign(
        kind=f["dimension"].str.replace(r", (?:check|lookup|write|revoke|mixed)_\w*.*$", "", regex=True))
    rows = [{"kind": kind, "n": len(g), "raw": int(_within(g["ratio"]).sum()),
             "norm": int(_within(g["norm"]).sum())}
            for kind, g in f.groupby("kind", sort=False)]
    t = pd.DataFrame(rows)
    return t.assign(transfers=2 * t["norm"] > t["n"])


def _within(r: pd.Series) -> pd.Series:
    return (r <= AGREE) & (r >= 1 / AGREE)


def transfer_section(ra: RunData, rb: RunData) -> list[str]:
    t = transfer_table(ra, rb)
    if t.empty:
        return []
    yes, no = t[t["transfers"]]["kind"].tolist(), t[~t["transfers"]]["kind"].tolist()
    lines = [
        "### Which figures transfer between the machines", "",
        "A kind of figure transfers when most of its figures are within ±25% after normalizing: a reader can "
        "then take that kind from one machine to the other through the normalization; the rest must be "
        "measured on the machine they are quoted for.", "",
        f"- Transfer ({len(yes)}): " + ("; ".join(yes) or "none") + ".",
        f"- Do not transfer ({len(no)}): " + ("; ".join(no) or "none") + ".", ""]
    t = t.assign(transfers=t["transfers"].map({True: "yes", False: "no"}))
    return [*lines, table(t, {"kind": "Kind of figure", "n": "N", "raw": "Within ±25% raw",
                              "norm": "Within ±25% normalized", "transfers": "Transfers"}), ""]


def _per_phase(rd: RunData) -> pd.DataFrame:
    """Closed-loop phases, one row per backend, scenario, kind and worker count, with the figures the run's
    own report shows (merge_repeats merges whatever it is given: one scenario at a time)."""
    closed = rd.phases[rd.phases["mode"] == "closed"]
    merged = pd.concat(
        [merge_repeats(g) for _, g in closed.groupby("scenario", sort=False)], ignore_index=True)
    # each run's own figures (median over rounds), so "p50 B" is the p50 run B's report shows; pooled over
    # every op it differed from B's appendix in 48 of 79 rows
    return with_cells(rd, merged)


def figure_pairs(ra: RunData, rb: RunData) -> pd.DataFrame:
    """Every Findings figure present in both runs: values, intervals, B / A, and whether they differ beyond
    both intervals."""
    da = {d.title: d for d in dimensions.compute(ra)}
    rows = []
    for d in dimensions.compute(rb):
        if d.title not in da:
            continue
        fa = {f.backend: f for f in da[d.title].figures}
        for f in d.figures:
            a = fa.get(f.backend)
            if a is None or f.text or a.text:
                continue
            ratio = f.value / a.value if a.value else float("nan")
            rows.append(
                {
                    "dimension": d.title, "backend": f.backend, "a": a.value, "b": f.value, "ratio": ratio,
                    "higher": d.higher_is_better, "timed": d.unit in TIMED_UNITS, "unit": d.unit,
                    "agree": bool(ratio and max(ratio, 1 / ratio) <= AGREE) if ratio == ratio else False,
                    # an assumed interval (a factor set by hand, one measurement) says no figure moved
                    "differ": not (assumed(a) or assumed(f) or overlap(a.interval(), f.interval())),
                    "headline": d.title.startswith(
                        ("Check p50", "Best throughput", "Throughput at", "Mixed", "Ingest")),
                    "unstable": a.unstable or f.unstable})
    return pd.DataFrame(rows)


def verdict_pairs(ra: RunData, rb: RunData) -> pd.DataFrame:
    """Every verdict of A (x clearly better than y in a dimension) and what B says of it."""
    db = {d.title: d for d in dimensions.compute(rb)}
    rows = []
    for d in dimensions.compute(ra):
        if d.title not in db:
            continue
        for figs_a, figs_b in zip(ranking.split(d, ra), ranking.split(db[d.title], rb), strict=True):
            in_b = {f.backend: f for f in figs_b if not math.isnan(f.value)}
            for x in figs_a:
                # a verdict is a pair clearly apart (figures.clearly_better), never a letter gap
                for y in figs_a:
                    if x.backend in in_b and y.backend in in_b and clearly_better(x, y, d.higher_is_better):
                        rows.append({"dimension": d.title, "better": x.backend, "worse": y.backend,
                                     "b": _in_b(in_b[x.backend], in_b[y.backend], d.higher_is_better)})
    return pd.DataFrame(rows, columns=["dimension", "better", "worse", "b"])


def _in_b(x, y, higher_is_better: bool) -> str:
    if clearly_better(x, y, higher_is_better):
        return "confirmed"
    return "reversed" if clearly_better(y, x, higher_is_better) else "no clear difference in B"


def summary(ra: RunData, rb: RunData) -> dict:
    """The comparison's headline counts (also printed by the CLI)."""
    v, f = verdict_pairs(ra, rb), figure_pairs(ra, rb)
    head = f[f["headline"]] if not f.empty else f
    return {"verdicts": len(v), "reversed": int((v["b"] == "reversed").sum()) if len(v) else 0,
            "unconfirmed": int((v["b"] == "no clear difference in B").sum()) if len(v) else 0,
            "figures": len(f), "differ": int(f["differ"].sum()) if len(f) else 0,
            "headline": len(head), "headline_agree": int(head["agree"].sum()) if len(head) else 0,
            **_normalized_summary(ra, rb)}


def _normalized_summary(ra: RunData, rb: RunData) -> dict:
    """The speed ratio and the headline figures within ±25% after normalizing (absent without both
    indexes)."""
    d = drift_table(ra, rb)
    if d.empty:
        return {}
    head = d.iloc[0]
    return {"speed_ratio": speed_ratio(ra, rb), "headline_agree_norm": round(head["agree_norm"] * head["n"]),
            "log_raw": head["log_raw"], "log_norm": head["log_norm"]}


def _move(r: float) -> float:
    """How far a ratio moved either way; a figure gone to zero moved furthest, 0 / 0 (no ratio) not at all."""
    if r != r:
        return -1.0
    return float("inf") if r == 0 else max(r, 1 / r)


def verdict_section(ra: RunData, rb: RunData) -> list[str]:
    s, v, f = summary(ra, rb), verdict_pairs(ra, rb), figure_pairs(ra, rb)
    share = s["headline_agree"] / s["headline"] if s["headline"] else float("nan")
    lines = [
        "## Verdicts", "",
        f"- Clear differences stated by A: **{s['verdicts']}**; reversed by B: **{s['reversed']}**; "
        f"not confirmed by B (no clear difference there): {s['unconfirmed']}.",
        f"- Findings figures in both runs: {s['figures']}; differing beyond both intervals: {s['differ']}.",
        f"- p50, throughput and ingest figures within ±25% of each other: **{s['headline_agree']} of "
        f"{s['headline']}** ({share:.0%})"
        + (f"; normalized by the machine-speed index: **"
           f"{s['headline_agree_norm']} of {s['headline']}** ({s['headline_agree_norm'] / s['headline']:.0%})"
           if "speed_ratio" in s and s["headline"]
           else "")
        + ".", ""]
    if (bad := v[v["b"] == "reversed"]) is not None and len(bad):
        lines += ["### Reversed verdicts", "", table(bad, {"dimension": "Dimension", "better": "Better in A",
                                                          "worse": "Worse in A", "b": "In B"}), ""]
    if len(f):
        f = f.assign(order=f["ratio"].map(_move))
        worst = f.sort_values("order", ascending=False).head(15)
        cols = {"dimension": "Dimension", "backend": "Backend", "a": "A", "b": "B", "ratio": "B/A"}
        # memory and bytes keep their raw ratio: speed does not move them
        if (sc := scales(ra, rb)) is not None:
            worst = _with_norm(worst, sc)
            worst = worst.assign(norm=worst["norm"].where(worst["timed"], worst["ratio"]))
            cols["norm"] = "B/A normalized"
        lines += ["### Figures that moved most", "", table(worst, {
            **cols, "differ": "Beyond both intervals", "unstable": "Unstable"}), ""]
    return lines


__all__ = ["render_compare", "summary", "pd"]
