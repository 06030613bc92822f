"""The shape sweep's section: "How cost grows with the graph's shape", from the runs of one `bench --shape`.

Each point is its own run; the manifest of every run of the sweep lists the points before it, so the last
report covers them all. Per parameter (depth, fanout, acl: authzbench/run/shape.py): a table of each backend's
check, heavy lookup and structural write p95 at each value, their exponent on the parameter (growth.py: with
its 95% interval over three or more values), which backend's reads and writes depend on it, and a chart per
measure.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from authzbench.core.numbers import fixed
from authzbench.generator.shape_params import PARAMS
from authzbench.report.core import charts
from authzbench.report.core.data import RunData, named_runs
from authzbench.report.sweep import chart, growth
from authzbench.report.sweep.runs import answers_line, labelled, mismatch_lines, size_table

MEASURES = {"check_p95_ms": "check p95 (ms)", "lookup_p95_ms": "heavy lookup p95 (ms)",
            "write_p95_ms": "structural write p95 (ms)"}
# what each parameter changes in the generator, for the section's reader (authzbench/run/shape.py sets it)
MEANING = {"depth": "groups nested in one chain per org (`group_depth`)",
           "fanout": "groups a user joins in each of their orgs (`groups_per_user`), i.e. members per group",
           "acl": "users granted view on each resource (`viewer_users_per_res`)"}


def shape_runs(rd: RunData) -> list[RunData]:
    """Every point's run of the sweep this run ends, in the sweep's order."""
    return named_runs(rd, [p["run"] for p in (rd.manifest.get("shape_sweep") or {}).get("points") or []])


def shape_table(rd: RunData, runs: list[RunData] | None = None) -> pd.DataFrame:
    """size_table's rows of every point of the sweep this run ends, with its `param` and `value`, each backend
    named with its mark (‡ a stand-in, † embedded)."""
    runs = shape_runs(rd) if runs is None else runs
    df = size_table(runs) if runs else pd.DataFrame()
    if df.empty:
        return df
    return labelled(runs, df).merge(pd.DataFrame((rd.manifest.get("shape_sweep") or {})["points"]), on="run")


def _point(r: RunData) -> str:
    """"depth=4": the point a run of the sweep measured."""
    p = next(p for p in r.manifest["shape_sweep"]["points"] if p["run"] == r.path.name)
    return f"{p['param']}={p['value']:g}"


def _intro(rd: RunData, runs: list[RunData]) -> list[str]:
    """What was held fixed, each point's run with its answers, and any wrong answer in bold."""
    swept = {key for key, _ in PARAMS.values()}
    fixed = {
        k: v for k, v in ((rd.manifest.get("config") or {}).get("overrides") or {}).items() if k not in swept}
    held = f" ({', '.join(f'{k}={v}' for k, v in fixed.items())})" if fixed else ""
    return [
        *mismatch_lines(runs, lambda r: f"`{_point(r)}`", "point"),
        f"Each parameter varied at `{rd.manifest.get('dataset', {}).get('profile')}`{held}, the others as "
        "the profile has them, one run per value; latencies at the lowest concurrency, as in a size sweep. "
        "Exponents: least-squares fits of log(measure) on log(value), with their 95% interval over three or "
        "more values. The points, each its own run, every answer checked against the oracle:", "",
        *(f"- {_point(r)}: {r.manifest['dataset']['relationships']:,} relationships, run `{r.path.name}`, "
          f"{answers_line(r)}"
          for r in runs)]


def depends(g: pd.DataFrame) -> list[str]:
    """The measures whose exponent on the parameter has a 95% interval clear of 0 (a two-point slope never
    is)."""
    out = []
    for m, title in MEASURES.items():
        f = growth.of(g, "value", m)
        if f and f.se is not None and (f.low > 0 or f.high < 0):
            out.append(f"{title} ({'grows' if f.k > 0 else 'falls'}, ^{f.k:.2f})")
    return out


def section(rd: RunData, out_dir: Path) -> str:
    """The markdown section, or "" when this run does not end a shape sweep."""
    runs = shape_runs(rd)
    df = shape_table(rd, runs)
    if df.empty or df.groupby("param")["value"].nunique().max() < 2:  # one value so far: nothing to compare
        return ""
    lines = ["## How cost grows with the graph's shape", "", *_intro(rd, runs)]
    summary: dict[str, list[str]] = {}
    for param, g in df.groupby("param", sort=False):
        lines += ["", *_param(rd, str(param), g, out_dir)]
        for b, gb in g.groupby("backend", sort=False):
            if dep := depends(gb):
                summary.setdefault(str(b), []).append(f"{param}: " + ", ".join(dep))
    lines += [
        "", "Which backend's reads and writes depend on which parameter (95% interval clear of flat):", ""]
    lines += [f"- **{b}**: " + "; ".join(d) for b, d in summary.items()] or ["- none, within the intervals."]
    return "\n".join(lines) + "\n"


def _param(rd: RunData, param: str, g: pd.DataFrame, out_dir: Path) -> list[str]:
    out = [f"### {param}: {MEANING.get(param, param)}", "",
           f"| backend | {param} | relationships | " + " | ".join(MEASURES.values()) + " |",
           "|---|---:|---:|" + "---:|" * len(MEASURES)]
    for _, r in g.sort_values(["backend", "value"]).iterrows():
        out.append(f"| {r['backend']} | {r['value']:g} | {r['relationships']:,} | "
                   + " | ".join(_fmt(r[m]) for m in MEASURES) + " |")
    out += ["", *growth.lines(g, "value", param, MEASURES)]
    drawn = chart.shape_sweep(rd, g, param, MEASURES, charts.chart_dir(out_dir, rd.manifest["run_id"]))
    return out + ["", *(f"![{MEASURES[m]} vs {param}]({p})" for m, p in drawn.items())] if drawn else out


def _fmt(v: float) -> str:
    return "—" if pd.isna(v) else fixed(v, 2)
