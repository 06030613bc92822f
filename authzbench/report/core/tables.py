"""The helpers every section shares, below all of them: number and percentile cells, markdown tables, link
targets, backend labels, and merging a phase's repeats. Nothing here imports a section."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

# the report's modules import these from here
from authzbench.core.numbers import JSON_DIGITS, fixed, num, significant  # noqa: F401
from authzbench.report.core.data import MARKS, NOT_RECORDED, RunData, merged_summary
from authzbench.report.core.noise import min_ops

MARK = "⚠"  # a percentile from too few ops
PCT_COLS = {"p50_ms": 50.0, "p95_ms": 95.0, "p99_ms": 99.0, "p999_ms": 99.9}


def fmt(v, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float):
        if not math.isfinite(v):
            return f"{v:,.0f}"
        if abs(v) >= 1000:
            return fixed(v, 0)
        return fixed(v, digits) if abs(v) < 100 else fixed(v, 1)
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def ratio_text(r: float, higher_is_better: bool) -> str:
    """×5.5 (lower is better) or ÷5.5 (higher is better); ×160, not ×1.6e+02."""
    if not math.isfinite(r):
        return ""
    short = fixed(r, 2).rstrip("0").rstrip(".") if r < 10 else fixed(r, 0)
    return ("÷" if higher_is_better else "×") + short


def ratio_from_zero(
    base: tuple[float, float], other: tuple[float, float], higher_is_better: bool) -> str | None:
    """The ratio to print when the smaller figure's interval (lo, hi) reaches zero, else None (the figures'
    own ratio holds). Such a base is not resolved: postgres's visibility lag 0.101 ms, polled every 1 ms
    (0-1.101), made openfga's 5,042 ms "×49,923"; all its interval supports is the ratio of the larger
    figure's low end to the base's high end, ">×4,580", and none when that is not above 1."""
    small, big = (other, base) if higher_is_better else (base, other)
    if small[0] > 0:
        return None
    floor = big[0] / small[1] if small[1] > 0 else math.inf
    return f">{ratio_text(floor, higher_is_better)}" if math.isfinite(floor) and floor > 1 else ""


def table(df: pd.DataFrame, columns: dict[str, str], digits: int = 3) -> str:
    """columns: df column -> header (with units)."""
    if df.empty:
        return "_no data recorded_\n"
    head = "| " + " | ".join(columns.values()) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    lines = [head, sep]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(fmt(row[c], digits) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def label(rd: RunData, backend: str) -> str:
    return f"{backend}{MARKS[rd.kind(backend)]}"


def anchor(name: str) -> str:
    return "t-" + "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


def link_target(name: str) -> str:
    """An explicit link target before a table (the Findings link to it)."""
    return f'<a id="{anchor(name)}"></a>\n'


def counted(text: str, noun: str) -> str:
    """A number and its noun, singular for exactly one: "1 row", "1,041 rows", "1 worker"."""
    return f"{text} {noun if text == '1' else noun + 's'}"


def fmt_pct(value: float, n: int, q: float, fmt: Callable[[float], str]) -> str:
    """A percentile cell: marked when it rests on fewer ops than it needs (then it is near the maximum)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{MARK} {fmt(value)}" if n < min_ops(q) else fmt(value)


# a write table's percentile columns: (the percentile, the column of ops in the smallest round behind it)
WRITE_PCT_COLS = {"write_p50_ms": (50.0, "write_fewest"), "write_p95_ms": (95.0, "write_fewest"),
                  "write_p99_ms": (99.0, "write_fewest"), "vis_p50_ms": (50.0, "vis_fewest"),
                  "vis_p95_ms": (95.0, "vis_fewest")}


def mark_write_percentiles(df: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """frames.write_table's percentile columns as text, ⚠ where the smallest round behind the cell had fewer
    ops than the percentile needs (figures.Cell.too_few's rule; mongo's write p95 of 14,631 ms rested on 2
    writes)."""
    out = df.copy()
    for col, (q, n_col) in WRITE_PCT_COLS.items():
        if col in out:
            out[col] = [fmt_pct(v, int(n), q, lambda x: fmt(x, digits))
                        for v, n in zip(out[col], out[n_col], strict=True)]
    return out


def mark_percentiles(df: pd.DataFrame, fmt: Callable[[float], str], n_col: str = "ops") -> pd.DataFrame:
    out = df.copy()
    # figures.Cell.too_few's rule: the smallest round decides, when the rows were merged over rounds
    n_col = "fewest_ops" if n_col == "ops" and "fewest_ops" in out else n_col
    for col, q in PCT_COLS.items():
        if col in out:
            out[col] = [fmt_pct(v, int(n), q, fmt) for v, n in zip(out[col], out[n_col], strict=True)]
    return out


def marked(df: pd.DataFrame, n_col: str = "ops") -> pd.DataFrame:
    return mark_percentiles(df, fmt, n_col)


def figure_mode(sub: pd.DataFrame) -> pd.DataFrame:
    """The phase rows of each backend's figure mode: the read consistency its first phase ran in (its default,
    the mode the figure is: figures.with_cells reads a merged row's first consistency). merge_repeats sums ops
    over whatever it is given, so openfga's via-group row showed 2,509 ops (every mode) beside a p50 from
    1,153; its other modes have their own rows in the appendix's "Freshness against latency"."""
    if sub.empty or "consistency" not in sub:
        return sub
    cons = sub["consistency"].fillna("")
    return sub[cons == cons.groupby(sub["backend"]).transform("first")]


def merge_repeats(sub: pd.DataFrame) -> pd.DataFrame:
    """Several repeats of one (backend, scenario, kind, concurrency): merge histograms and sum counts."""
    rows = []
    for _, g in sub.groupby(
        ["backend", "concurrency", "kind", "mode", "target_rate"], dropna=False, sort=False):
        s = merged_summary([h for hs in g["hists"] for h in hs])
        row = g.iloc[0].to_dict()
        for col in ("ops", "errors", "timeouts", "mismatches", "checked", "results", "duplicates", "wall_s",
                    "scheduled", "dropped", "late", "attempted"):
            if col in g:
                row[col] = g[col].sum()
        row.update({"mean_ms": s.mean_ms, "p50_ms": s.p50_ms, "p95_ms": s.p95_ms, "p99_ms": s.p99_ms,
                    "p999_ms": s.p999_ms, "max_ms": s.max_ms, **longest_of(g)})
        row["ops_per_s"] = g["ops_per_s"].mean()
        row["fewest_ops"] = int(g["ops"].min())  # the ⚠ rule is per round (figures.Cell.too_few)
        row["status"] = "complete" if (g["status"] == "complete").all() else "incomplete"
        rows.append(row)
    return pd.DataFrame(rows)


def longest_of(g: pd.DataFrame) -> dict:
    """The longest op of a merged row's phases and when it began (data.longest_op); where any phase did not
    record it, its time is not recorded and the length is the histograms' maximum."""
    if "longest_ms" not in g or g["longest_ms"].isna().any():
        return dict(NOT_RECORDED)
    top = g.loc[g["longest_ms"].idxmax()]
    return {"max_ms": float(top["longest_ms"]), **{k: float(top[k]) for k in NOT_RECORDED}}


def monitor_summary(rd: RunData, stage: str | None, title: str) -> str:
    """The server CPU/RSS table of one phase (or of every phase when stage is None)."""
    m = rd.monitor
    if stage is not None:
        m = m[(m["stage"] == stage) | m["stage"].str.startswith(f"{stage} via ")]
    lines = [f"#### {title}", ""]
    if m.empty:
        return "\n".join([*lines, "_no monitor samples_", ""])
    return "\n".join([*lines, table(m.assign(backend=[label(rd, b) for b in m["backend"]]),
                                    {"backend": "Backend", "stage": "Phase", "cpu_mean": "CPU mean (%)",
                                     "cpu_min": "CPU min (%)", "cpu_max": "CPU max (%)",
                                     "rss_mean_mb": "Memory mean (MiB)", "rss_min_mb": "Memory min (MiB)",
                                     "rss_max_mb": "Memory max (MiB)", "samples": "Samples"}, 1)])
