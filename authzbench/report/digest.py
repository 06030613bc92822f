"""The ranked figures across every topic: their JSON beside the report (write_json) and the appendix's table
of every ranked figure with its interval (figure_table). The main report's digests are their topics'
(reads.digest, mixed.digest, writes.digest, outcomes.correctness_digest)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from authzbench.report import churn, freshness
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import LETTER_MEANING, standing
from authzbench.report.core.frames import longest_checks
from authzbench.report.core.ranking import Dimension, ranked
from authzbench.report.core.tables import label, num, significant, table
from authzbench.report.dimensions import compute

# the ranked figures, machine-readable ----------------------------------------------------------------

def figure_records(rd: RunData, dims: list[Dimension] | None = None) -> list[dict]:
    """Every ranked figure: dimension, backend, value, unit, interval (measured or assumed, with its basis),
    n, letters (figures.letters: sharing one = not clearly apart), standing (1 + its first letter's position:
    a = 1; never smaller for a worse figure) and flags; by default the ranking's dimensions and the churn
    steps' (the decision summary's workload rows letter those)."""
    out = []
    for d in dims if dims is not None else [*compute(rd), *churn.dimensions(rd)]:
        r = ranked(rd, d)
        for f in d.figures:
            if f.backend not in r:
                continue
            lo, hi = f.interval()
            out.append({"dimension": d.key, "title": d.title, "group": d.group, "backend": f.backend,
                        "value": _finite(f.value), "unit": d.unit, "interval": [_finite(lo), _finite(hi)],
                        # a figure shown as words ("no worker count met the SLO") has no interval to judge
                        "interval_kind": None if f.text else "assumed" if f.assumed else "measured",
                        "interval_basis": (f.assumed or None) if not f.text else None,
                        "n": f.n, "letters": r[f.backend][1],
                        "standing": standing(r[f.backend][1]) if r[f.backend][1] else None,
                        "networked": r[f.backend][2],
                        "higher_is_better": d.higher_is_better, "text": f.text or None,
                        "client_bound": f.client_bound,  # null: unknown or not a throughput
                        "base": f.base or None,  # the count a rate rests on ("14 of 200")
                        "flags": [k for k, on in (("unstable", f.unstable), ("too_few", f.too_few),
                                                  ("disturbed", f.disturbed),
                                                  ("client_bound", bool(f.client_bound)),
                                                  ("stand_in", rd.kind(f.backend) == "stand-in"),
                                                  ("embedded", rd.kind(f.backend) == "embedded")) if on]})
    return out


def _finite(v: float) -> float | None:
    return significant(float(v)) if math.isfinite(v) else None


def _interval_text(lo: float | None, hi: float | None, too_few: bool) -> str:
    """"1.2 - 3.4"; "≥ 37,618" for a percentile from too few ops (open above), "≤ 837" for a rate resting on
    one (open down to 0, ranking.Figure.worse_below); "—" for an end not known."""
    if too_few and lo is not None and hi is None:
        return f"≥ {num(lo)}"
    if too_few and lo == 0 and hi is not None:
        return f"≤ {num(hi)}"
    return f"{num(lo) if lo is not None else '—'} - {num(hi) if hi is not None else '—'}"


def write_json(rd: RunData, path: Path) -> None:
    out = {"run_id": rd.manifest["run_id"], "figures": figure_records(rd)}
    # only runs with a churn sweep carry it: an older run's JSON stays as it was
    if sustainable := churn.json_records(rd):
        out["sustainable_churn"] = sustainable
    # the longest check of each (backend, scenario, workers) with when it began; only runs that recorded it
    if not (lc := longest_checks(rd)).empty:
        out["longest_checks"] = [{k: _json_value(v) for k, v in r.items()} for r in lc.to_dict("records")]
    if not (st := freshness.stale_allows(rd)).empty:  # per mode and writer count, per 1,000 revocations
        out["stale_allows"] = [{k: _json_value(v) for k, v in r.items()} for r in st.to_dict("records")]
    path.write_text(json.dumps(out, indent=1) + "\n")


def _json_value(v: object) -> object:
    v = v.item() if hasattr(v, "item") else v  # numpy scalars from the frame: plain JSON numbers
    return _finite(v) if isinstance(v, float) else v


def figure_table(rd: RunData, out_dir: Path) -> str:
    """The appendix's table of every ranked figure with its interval and op count."""
    recs = figure_records(rd)
    if not recs:
        return ""
    df = pd.DataFrame(recs)
    df["backend"] = [label(rd, b) for b in df["backend"]]
    df["iv"] = [_interval_text(a, b, "too_few" in f)
                + (f" ({basis})" if isinstance(basis, str) and basis else "")
                for (a, b), f, basis in zip(df["interval"], df["flags"], df["interval_basis"], strict=True)]
    # a letter string, or "unranked" where there is no value: a numeric rank column with a None printed 1.000
    df["cld"] = [x if isinstance(x, str) and x else "unranked" for x in df["letters"]]
    # pandas stores a missing text as NaN (truthy) among strings: "t or num(v)" emptied 210 of 213 cells
    df["val"] = [t if isinstance(t, str) and t else num(v)
                 for t, v in zip(df["text"], df["value"], strict=True)]
    df["flag"] = [", ".join(f) for f in df["flags"]]
    # a rate's base in its n column: "15 of 181" (revocations), the count it rests on
    df["n"] = [b if isinstance(b, str) else f"{int(x):,}" if x is not None and x == x else "—"
               for x, b in zip(df["n"], df["base"], strict=True)]
    return "\n".join(["## Every ranked figure", "",
                      "Each figure of the Findings and the decision summary with its interval and the ops it "
                      "rests on (the same values as the JSON beside the report). Letters: "
                      f"{LETTER_MEANING}. An interval marked assumed is not measured (its basis follows it): "
                      "it is never the ground of a clear difference.", "",
                      table(df, {"title": "Dimension", "backend": "Backend", "val": "Figure", "unit": "Unit",
                                 "iv": "Interval", "n": "n", "cld": "Letters", "flag": "Flags"}), ""])

