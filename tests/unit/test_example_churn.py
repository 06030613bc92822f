"""Every committed example with a churn sweep, checked against its own records (issue 67, item 8): each
deciding step's check p95 is the p95 of the step's recorded checks, its interval holds at least the
order-statistics interval of those checks, its verdict follows from that interval and the SLO (held: within,
undecided: across, failed on the reads: over), the sustainable churn names every undecided step with its
interval in the main report, and every churn figure ranked in the JSON lies within its interval. The committed
files are what their results render to (test_example_reports re-renders each), so these checks read them as
committed."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from authzbench.core.metrics import merge, percentile
from authzbench.report.core.frames import SLO_DEFAULTS
from authzbench.report.core.noise import order_stat_interval
from authzbench.report.core.tables import significant
from authzbench.tools.examples import REPORTS, Example, examples


def _json(ex: Example, out: Path) -> dict:
    return json.loads((out / ex.report.replace(".md", ".json")).read_text())


CHURN = [ex for ex in examples() if (REPORTS / ex.report.replace(".md", ".json")).is_file()
         and "sustainable_churn" in _json(ex, REPORTS)]


def _records(ex: Example) -> list[dict]:
    with gzip.open(REPORTS / ex.runs[0] / "records.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def _checks(recs: list[dict], backend: str, rate: float) -> tuple[str, ...]:
    """The recorded check histograms of the step's last attempt (every round, when it was repeated)."""
    starts = [r for r in recs if r["type"] == "phase_start" and r["scenario"] == "churn"
              and r["backend"] == backend and r.get("churn_rate") == rate]
    last = max((r.get("attempt", 0) for r in starts), default=0)
    phases = {r["phase"] for r in starts if r.get("attempt", 0) == last}
    return tuple(r["hist"] for r in recs if r["type"] == "interval" and r["phase"] in phases
                 and r["kind"] == "check" and r["ops"])


def _slo(ex: Example) -> float:
    manifest = json.loads((REPORTS / ex.runs[0] / "manifest.json").read_text())
    return float((manifest["config"].get("slo") or {}).get("check_p95_ms", SLO_DEFAULTS["check_p95_ms"]))


def check_example(ex: Example, out: Path) -> list[str]:
    """What in the example rendered in `out` disagrees with its records (empty: nothing)."""
    recs, slo, found = _records(ex), _slo(ex), []
    main = re.sub(r"\s+", " ", (out / ex.report).read_text())
    data = _json(ex, out)
    for s in data["sustainable_churn"]:
        for step in s["deciding_steps"]:
            where = f"{s['backend']} {step['rate_per_s']:g}/s"
            hists = _checks(recs, s["backend"], step["rate_per_s"])
            p95 = percentile(merge(hists), 95.0) / 1000
            lo, hi = step["interval_ms"]
            os_lo, os_hi = order_stat_interval(hists, 95.0)
            if significant(p95) != step["check_p95_ms"] or step["checks"] != sum(merge((h,)).get_total_count()
                                                                               for h in hists):
                found.append(f"{where}: p95 {step['check_p95_ms']} from {p95:.4g} in the records")
            if not (lo <= significant(os_lo) and significant(os_hi) <= hi):
                found.append(
                    f"{where}: interval {lo}-{hi} narrower than the checks' own {os_lo:.4g}-{os_hi:.4g}")
            state = step["state"]
            if (state == "held" and hi > slo) or (state == "undecided" and not lo <= slo < hi):
                found.append(f"{where}: {state} with {lo}-{hi} against {slo:g} ms")
            if state == "failed" and s["limit"] and s["limit"].startswith("check p95") and lo <= slo:
                found.append(f"{where}: failed on its reads with {lo}-{hi} against {slo:g} ms")
            if state == "undecided" and f"{step['rate_per_s']:g}/s undecided (check p95 " not in main:
                found.append(f"{where}: undecided, not named in the main report's sustainable churn")
        if ("undecided" in s["text"]) != bool(s["undecided_per_s"]):
            found.append(f"{s['backend']}: text {s['text']!r} against undecided {s['undecided_per_s']}")
    for f in data["figures"]:
        lo, hi = f["interval"]
        if f["dimension"].startswith("churn_p95/") and not (lo <= f["value"] <= hi and f["n"] >= 20):
            found.append(f"{f['dimension']} {f['backend']}: {f['value']} outside {lo}-{hi} or n={f['n']}")
    return found


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in CHURN])
def test_every_deciding_churn_step_is_judged_by_the_interval_of_its_recorded_checks(ex):
    assert check_example(ex, REPORTS) == []


def test_the_committed_examples_include_a_churn_sweep():
    assert CHURN, "no committed example has a churn sweep: the checks above test nothing"
