"""One stale-allow quantity (issue 67 item 1) on fixture records: stale allows per 1,000 revocations (not
writes) with Wilson's 95% interval, per read mode and writer count, its base beside it; the ranked rows name
their mode and writers and rank by the interval; churn steps' stale allows apart under their own label; the
freshness table's visibility p95 the figure the Findings rank (item 5)."""

from __future__ import annotations

import pytest

from authzbench.report import churn, decision, dimensions, findings, freshness
from authzbench.report.core import ranking
from authzbench.report.core.figures import clearly_better, letters
from tests.unit.test_report_churn import SPICE, _phase, churn_step
from tests.unit.test_report_findings import NET, Run

PERMIFY = {"label": "Permify 1.6", "version": "1.6", "comparable": True, "notes": [],
           "consistency": "at_least_as_fresh"}


def writes(run: Run, b: str, scenario: str, mode: str, writers: int, n_writes: int, revocations: int | None,
           stale: int, lag_ms: float = 1.0) -> Run:
    """One structural write phase: n_writes timed writes, `revocations` of them revocations (None: a record
    from before the count), `stale` of those whose first check still allowed, each change visible after
    lag_ms."""
    extra = {"stale_allows": stale, **({"revocations": revocations} if revocations is not None else {})}
    start = {"mode": "closed", "concurrency": writers, "stages": [], "consistency": mode}
    return _phase(run, b, scenario, f"{b}/{scenario}@{mode}/c{writers}/r0", start, [
        ("write", [5.0] * n_writes, {"extra": extra}), ("visibility", [lag_ms] * n_writes, {})])


def spicedb_run() -> Run:
    """SpiceDB in its session mode (minimize_latency) at 1 writer, 32 of 32 revocations stale in each of two
    write kinds; at 8 writers the same mode named (200 of 200) and fully_consistent (14 of 200)."""
    run = Run().server("spicedb-pg", SPICE).server("postgres", NET)
    writes(run, "spicedb-pg", "write_membership", "", 1, 64, 32, 32, lag_ms=4_000.0)
    writes(run, "spicedb-pg", "write_hierarchy", "", 1, 64, 32, 32, lag_ms=5_300.0)
    writes(run, "spicedb-pg", "revoke_then_check", "minimize_latency", 8, 200, 200, 200, lag_ms=5_000.0)
    writes(run, "spicedb-pg", "revoke_then_check", "fully_consistent", 8, 200, 200, 14, lag_ms=20.0)
    writes(run, "postgres", "write_membership", "", 1, 400, 200, 0, lag_ms=0.02)
    return writes(run, "postgres", "revoke_then_check", "", 8, 200, 200, 0, lag_ms=0.2)


def _rows(run: Run) -> dict[tuple[str, str, int], dict]:
    df = freshness.stale_allows(run.data())
    return {(r["backend"], r["mode"], r["writers"]): r for r in df.to_dict("records")}


def test_stale_allows_are_per_1000_revocations_per_mode_and_writer_count_with_wilsons_interval():
    rows = _rows(spicedb_run())
    one = rows[("spicedb-pg", "minimize_latency (session)", 1)]
    # 128 writes, 64 revocations
    assert (one["stale_allows"], one["revocations"], one["per_1k"]) == (64, 64, 1000.0)
    # the phase naming the session mode joins it: one mode, shown once
    assert rows[("spicedb-pg", "minimize_latency (session)", 8)]["revocations"] == 200
    strict = rows[("spicedb-pg", "fully_consistent", 8)]
    lo, hi = freshness.wilson(14, 200)
    assert strict["per_1k"] == 70.0 and (strict["lo_1k"], strict["hi_1k"]) == (1000 * lo, 1000 * hi)
    assert not strict["own"] and strict["strict"]


def test_a_record_without_the_revocation_count_counts_one_per_revoke_op_and_one_per_two_other_writes():
    run = Run().server("postgres", NET)
    writes(run, "postgres", "write_membership", "", 1, 40, None, 1)
    writes(run, "postgres", "revoke_then_check", "", 1, 30, None, 0)
    assert _rows(run)[("postgres", "—", 1)]["revocations"] == 20 + 30


def test_the_ranked_rows_name_the_own_mode_and_the_writers_and_show_each_base(tmp_path):
    rd = spicedb_run().data()
    dims = {d.key: d for d in dimensions.compute(rd) if d.key.startswith("stale_allows/")}
    # most writers first: the decision summary's row
    assert list(dims) == ["stale_allows/8", "stale_allows/1"]
    eight = dims["stale_allows/8"]
    assert eight.title == "Stale allows, own read mode, 8 writers" and eight.unit == "per 1,000 revocations"
    spice = next(f for f in eight.figures if f.backend == "spicedb-pg")
    # the own mode, not fully_consistent
    assert (spice.value, spice.base, spice.n) == (1000.0, "200 of 200", 200)
    assert spice.detail.startswith("minimize_latency (session), 8 writers: 200 of 200 revocations, 95% ")
    row = next(ln for ln in decision.section(rd, tmp_path).splitlines() if ln.startswith("| Stale allows"))
    assert row.startswith("| Stale allows, own read mode, 8 writers | per 1,000 revocations ↓ |")
    assert "1,000 [200 of 200]" in row and "0 [0 of 200]" in row
    line = next(ln for ln in findings.render_section(rd, str).splitlines() if "own read mode, 1 writer" in ln)
    assert "**spicedb-pg** 1,000 [64 of 64]" in line and "**postgres** 0 [0 of 200]" in line


def _figure(b: str, k: int, n: int) -> ranking.Figure:
    lo, hi = freshness.wilson(k, n)
    return ranking.Figure(b, 1000 * k / n, bounds=(1000 * lo, 1000 * hi), n=n, base=f"{k} of {n}")


def test_zero_of_three_is_not_clearly_better_than_a_small_rate_nor_a_large_clean_sample():
    few, clean, some = _figure("mongo", 0, 3), _figure("postgres", 0, 794), _figure("x", 1, 3)
    low = _figure("y", 5, 100)
    assert not any(clearly_better(few, f, False) or clearly_better(f, few, False) for f in (clean, some, low))
    assert clearly_better(clean, low, False)  # 0 of 794 (0-4.8) against 5 of 100 (21.5-112): measured apart
    # 0 of 3 (0-562) is apart only from a rate near 1,000: 96 of 96 is 962-1,000
    assert clearly_better(few, _figure("spicedb-pg", 96, 96), False)
    assert letters([few, clean, low], False) == {"postgres": "a", "mongo": "ab", "y": "b"}


def test_a_nonzero_count_of_a_strict_mode_is_shown_as_itself_not_as_the_own_modes_zero(tmp_path):
    run = Run().server("permify", PERMIFY)
    writes(run, "permify", "revoke_then_check", "", 1, 100, 100, 0)
    writes(run, "permify", "revoke_then_check", "at_least_as_fresh", 8, 194, 194, 0)
    writes(run, "permify", "revoke_then_check", "fully_consistent", 8, 181, 181, 15)
    rd = run.data()
    summary = " ".join(freshness.summary_lines(rd))
    assert "permify fully_consistent 15 of 181 (82.9 per 1,000, 95% 50.9-132)" in summary
    assert "permify at_least_as_fresh (session) 0 of 194 (0 per 1,000" in summary
    eight = next(d for d in dimensions.compute(rd) if d.key == "stale_allows/8")
    assert [f.detail.split(":")[0] for f in eight.figures] == ["at_least_as_fresh (session), 8 writers"]
    table = freshness.section(rd, tmp_path)
    assert ("| permify | fully_consistent | 8 | revoke_then_check | 15 of 181 revocations | 82.9 | 50.9-132 |"
            in table)


def test_churn_steps_stale_allows_are_apart_from_the_quantity_under_their_own_label(tmp_path):
    run = spicedb_run()
    churn_step(run, "spicedb-pg", 10.0, 3.0, stale=12)  # 60 changes, 12 revocations, all stale
    rows = _rows(run)
    assert rows[("spicedb-pg", "minimize_latency (session)", 1)]["revocations"] == 64  # churn not pooled in
    text = churn.section(run.data(), tmp_path)
    assert (
        "Stale allows under churn, per 1,000 of the step's revocations" in text and "1,000 [12 of 12]" in text
    )


def test_the_freshness_tables_visibility_p95_is_the_ranked_worst_write_kind_not_a_pool():
    rd = spicedb_run().data()
    ranked = next(d for d in dimensions.compute(rd) if d.key == "visibility_p95")
    spice = next(f for f in ranked.figures if f.backend == "spicedb-pg")
    run = spicedb_run()
    start = {"mode": "closed", "concurrency": 1, "stages": [], "consistency": ""}
    _phase(run, "spicedb-pg", "check_view_via_group_member", "spicedb-pg/via/c1/r0", start,
           [("check", [2.0] * 400, {})])
    start = {**start, "consistency": "fully_consistent"}
    _phase(run, "spicedb-pg", "check_view_via_group_member", "spicedb-pg/via@f/c1/r0", start,
           [("check", [4.0] * 400, {})])
    fr = freshness.freshness(run.data()).set_index("mode")
    session = fr.loc["minimize_latency (session)"]
    # the hierarchy writes' lag
    assert session["lag_p95_ms"] == spice.value == pytest.approx(5_300.0, rel=0.01)
    assert session["lag_writers"] == 1 and fr.loc["fully_consistent"]["lag_writers"] == 8
    assert session["stale"].startswith("1 writer: 64 of 64 revocations, 1,000 per 1,000 (95% ")
