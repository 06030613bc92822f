"""One stale-allow quantity in every committed example (issue 67 item 1), checked against the raw records, not
the renderer's tables: stale allows per 1,000 revocations with Wilson's 95% interval, per read mode and writer
count, its base "k of n" beside it; the ranked rows name their mode and writer count, every stale-allow column
says per 1,000 revocations, and a mode's nonzero count (Permify fully_consistent, 15 of 181 at 8 writers in
20261129-201802) is shown as itself wherever it is shown. `check(report_dir, ex)` runs the same checks on any
rendering (e.g. a fresh one in a temp dir before the examples are re-rendered)."""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest

from authzbench.tools.examples import REPORTS, examples
from authzbench.workloads.catalog import WRITE_SCENARIOS

BENCH = [ex for ex in examples() if (REPORTS / ex.report.replace(".md", ".json")).is_file()]
Z = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson's score interval, written out again here so the report's own function is checked, not reused."""
    p, d = k / n, 1 + Z * Z / n
    centre, half = (p + Z * Z / (2 * n)) / d, Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / d
    return (0.0 if k == 0 else centre - half), (1.0 if k == n else centre + half)


def from_records(run_dir: Path) -> dict[tuple[str, str, int], tuple[int, int]]:
    """(backend, mode, writers) -> (stale allows, revocations) from the records: every structural write
    phase's last attempt, a phase with no mode in its backend's session mode ("" for a backend without modes),
    a record without the revocation count counting one a revoke_then_check op and one per two other
    write ops."""
    recs = _records(run_dir)
    session = {r["backend"]: r.get("info", {}).get("consistency", "") for r in recs if r["type"] == "server"}
    last: dict[tuple, dict] = {}
    for r in (r for r in recs if r["type"] == "phase_start" and r["scenario"] in WRITE_SCENARIOS):
        key = (r["backend"], r["scenario"], r.get("consistency") or "", r["concurrency"], r["repeat"])
        if key not in last or r.get("attempt", 0) >= last[key].get("attempt", 0):
            last[key] = r
    kept = {r["phase"]: r for r in last.values()}
    sums: dict[str, defaultdict] = {p: defaultdict(int) for p in kept}
    for r in recs:
        if r["type"] == "interval" and r["kind"] == "write" and r["phase"] in kept:
            sums[r["phase"]]["ops"] += r["ops"]
            for k, v in (r.get("extra") or {}).items():
                sums[r["phase"]][k] += v
    out: dict[tuple[str, str, int], tuple[int, int]] = {}
    for p, st in kept.items():
        s = sums[p]
        n = s["revocations"] if "revocations" in s else (s["ops"] if st["scenario"] == "revoke_then_check"
                                                         else s["ops"] // 2)
        key = (st["backend"], st.get("consistency") or session.get(st["backend"], ""), st["concurrency"])
        k0, n0 = out.get(key, (0, 0))
        out[key] = (k0 + s["stale_allows"], n0 + n)
    return out


def _json(report_dir: Path, ex) -> dict:
    return json.loads((report_dir / ex.report.replace(".md", ".json")).read_text())


def _records(run_dir: Path) -> list[dict]:
    with gzip.open(run_dir / "records.jsonl.gz", "rt") as fh:
        return [json.loads(x) for x in fh]


def _session(run_dir: Path) -> dict[str, str]:
    return {r["backend"]: r.get("info", {}).get("consistency", "")
            for r in _records(run_dir)
            if r["type"] == "server"}


def _raw_mode(mode: str) -> str:
    """The JSON's shown mode ("minimize_latency (session)", "—") as the records name it."""
    return "" if mode == "—" else mode.removesuffix(" (session)")


def check_json_rows(report_dir: Path, ex) -> None:
    """The JSON's stale_allows rows are the records' counts, one per (backend, mode, writers), Wilson's
    interval."""
    want = from_records(REPORTS / ex.runs[0])
    got = {
        (r["backend"], _raw_mode(r["mode"]), r["writers"]): r for r in _json(report_dir, ex)["stale_allows"]}
    assert set(got) == set(want)
    for key, (k, n) in want.items():
        r = got[key]
        assert (r["stale_allows"], r["revocations"]) == (k, n), key
        lo, hi = wilson(k, n)
        assert r["per_1k"] == pytest.approx(1000 * k / n, rel=1e-3, abs=1e-9), key
        assert (r["lo_1k"], r["hi_1k"]) == pytest.approx((1000 * lo, 1000 * hi), rel=1e-3, abs=1e-9), key


def check_ranked_figures(report_dir: Path, ex) -> None:
    """Every ranked stale-allow figure: one unit, its title naming the own read mode and the writer count, its
    base and interval the records' for that backend's session mode at those writers."""
    want, session = from_records(REPORTS / ex.runs[0]), _session(REPORTS / ex.runs[0])
    figs = [f for f in _json(report_dir, ex)["figures"] if "stale" in (f["dimension"] + f["title"]).lower()]
    assert figs
    for f in figs:
        m = re.fullmatch(r"Stale allows, own read mode, (\d+) writers?", f["title"])
        assert m and f["unit"] == "per 1,000 revocations", f["title"]
        k, n = want[(f["backend"], session.get(f["backend"], ""), int(m.group(1)))]
        assert f["base"] == f"{k:,} of {n:,}" and f["n"] == n, (f["title"], f["backend"])
        lo, hi = wilson(k, n)
        assert f["interval"] == pytest.approx([1000 * lo, 1000 * hi], rel=1e-3, abs=1e-9)


def check_text(report_dir: Path, ex) -> None:
    """No stale-allow column or row without its unit, and every mode's count at 8 writers as itself in the
    main report's per-mode line and the appendix's table ("15 of 181", never a 0 for it)."""
    main = (report_dir / ex.report).read_text()
    appendix = (report_dir / ex.report.replace(".md", "-appendix.md")).read_text()
    for text in (main, appendix):
        for line in text.splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")] if line.startswith("|") else []
            heads = [c for c in cells if re.match(r"(\*\*)?stale allows?\b", c, re.I)]
            assert all("per 1,000" in c or "own read mode" in c for c in heads), line[:200]
    session = _session(REPORTS / ex.runs[0])
    for (b, mode, writers), (k, n) in from_records(REPORTS / ex.runs[0]).items():
        shown = "—" if not mode else f"{mode} (session)" if mode == session.get(b) else mode
        row = (rf"^\| {re.escape(b)}( [‡†])? \| {re.escape(shown)} \| {writers} "
               rf"\| [^|]* \| {k:,} of {n:,} revocations \|")
        assert re.search(row, appendix, re.M), (b, shown, writers, k, n)
        if writers == 8:  # the decision summary's line per mode at 8 writers
            named = "" if shown == "—" else re.escape(shown) + " "
            folded = re.sub(r"\s+", " ", main)  # a long line is folded: read it as one
            assert re.search(rf"{re.escape(b)}( [‡†])? {named}{k:,} of {n:,} \(", folded), (b, shown, k, n)


CHECKS = (check_json_rows, check_ranked_figures, check_text)


WITH_RECORDS = [e for e in BENCH if (REPORTS / e.runs[0] / "records.jsonl.gz").is_file()]


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in WITH_RECORDS])
@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_every_example_shows_one_stale_allow_quantity_from_its_records(ex, check):
    if not from_records(REPORTS / ex.runs[0]):
        pytest.skip("no structural write phase in this run")
    check(REPORTS, ex)


def test_the_records_of_20261129_201802_give_permify_fully_consistent_15_of_181_at_8_writers():
    # the figure the ranked row hid behind a 0 (issue 67): the records' count, which check_text finds as
    # itself
    assert from_records(REPORTS / "data" / "20261129-201802")[("permify", "fully_consistent", 8)] == (15, 181)
