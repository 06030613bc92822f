"""Why a failure at a small size predicts failure at the target: the growth the committed size sweep
measured for the figure the need rests on, from its `baseline` run to its `large` run (one sweep: one host,
one commit). Cited from the data, never assumed: where the sweep measured the figure shrinking, or did not
measure it, the line says so and the backend leaves on its measured failure alone."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from authzbench.decide.plan import EXAMPLES

# need -> (scenario, workers, metric, kind, what the figure is, whether a larger figure is worse)
FIGURE = {
    "checks": ("check_view_via_group_member", 1, "p95_ms", None, "via-group check p95 at 1 worker", True),
    "churn": ("write_membership", 1, "p95_ms", "write", "membership write p95", True),
    "lookups": ("lookup_resources_view_regular", 1, "p95_ms", None, "median user's lookup p95", True),
}


@lru_cache(maxsize=1)
def committed_sweep(root: Path = EXAMPLES) -> tuple[Path, Path] | None:
    """(baseline run, large run) of the newest committed size sweep holding both."""
    best = None
    for man in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
        try:
            m = json.loads(man.read_text())
        except ValueError:
            continue
        sweep, profile = m.get("sweep") or {}, (m.get("config") or {}).get("profile")
        if sweep and profile == "large":
            runs = dict(zip(sweep.get("profiles") or [], sweep.get("runs") or [], strict=False))
            if "baseline" in runs and (root / runs["baseline"]).is_dir():
                best = (root / runs["baseline"], man.parent)
    return best


@lru_cache(maxsize=2)
def _run(path: Path):
    from authzbench.report.core.data import load_run

    return load_run(path)


def _figure(rd, backend: str, need: str) -> float | None:
    if need == "throughput":
        from authzbench.report.core.frames import resource_table

        t = resource_table(rd)
        row = t[t["backend"] == backend] if not t.empty else t
        return float(row["cpu_s_per_1k"].iloc[0]) if len(row) else None
    from authzbench.report.core.figures import cell

    scenario, workers, metric, kind, _, _ = FIGURE[need]
    c = cell(rd, backend, scenario, workers, metric, kind)
    return c.value if c is not None else None


def predicts(backend: str, need: str, target_relationships: float, measured_at: float = 0.0) -> str:
    """One line: the growth direction behind a failure's prediction, with the figure and the runs. A failure
    measured at or past the target's size predicts nothing about a smaller target from growth: said so."""
    if measured_at >= target_relationships and need != "stale":
        return (f"measured at {measured_at:,.0f} relationships, at or past the target's "
                f"{target_relationships:,.0f}: growth does not carry this failure down to the target; the "
                "smaller sizes' verdicts and the projection decide it")
    if need == "stale":
        return ("a stale allow comes from the read mode (its window, or a bug under a fully consistent one), "
                "not from the graph's size: nothing in the size sweep makes it go away at a larger size")
    sweep = committed_sweep()
    what = "server CPU per 1,000 checks" if need == "throughput" else FIGURE[need][4]
    if sweep is None:
        return f"no committed size sweep to cite: it leaves on the measured failure alone ({what})"
    small, large = (_run(p) for p in sweep)
    a, b = _figure(small, backend, need), _figure(large, backend, need)
    runs = f"{sweep[0].name} -> {sweep[1].name}"
    if a is None or b is None or a <= 0:
        return f"the committed size sweep ({runs}) did not measure its {what} at both sizes: it leaves on " \
               "the measured failure alone"
    r = b / a
    if r < 1:
        return (f"its {what} fell x{r:.2f} from baseline to large in the committed size sweep ({runs}): the "
                "sweep does not predict the failure to hold at the target; it leaves on the measured failure")
    return (f"its {what} grew x{r:.2f} from baseline to large (~10x the relationships) in the committed size "
            f"sweep ({runs}): at {target_relationships:,.0f} relationships it is not expected to recover")
