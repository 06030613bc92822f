"""One figure, one printed value (issue 67, items 5 and 10): the report's formatters round by one rule, so a
figure read from the run and the same figure read back from the JSON print the same digits."""

from __future__ import annotations

import numpy as np
import pandas as pd

from authzbench.core.numbers import fixed, num, significant
from authzbench.report import dimensions
from authzbench.report.core.tables import fmt, ratio_text
from authzbench.report.document import render


def test_a_half_way_figure_prints_the_same_digits_from_the_run_and_from_the_json():
    # the four figures of 20261129-201802 whose JSON value is an exact .5 at the digits shown
    for raw, shown in ((45084.52, "45,085"), (1704.5, "1,705"), (3.1550004, "3.16"), (2.3149999999, "2.32")):
        assert num(raw) == num(significant(raw)) == shown


def test_every_formatter_prints_a_figure_and_its_json_value_alike():
    rng = np.random.default_rng(67)
    values = np.concatenate([rng.lognormal(0, 4, 5000), np.round(rng.lognormal(0, 4, 2000), 3) + 5e-4])
    for v in map(float, values):
        j = significant(v)
        assert num(v) == num(j), v
        assert fmt(v) == fmt(j) and fmt(v, 1) == fmt(j, 1), v
        assert ratio_text(v, False) == ratio_text(j, False), v


def test_half_way_rounds_up_not_to_even():
    assert fixed(0.125, 2) == "0.13" and fixed(2.5, 0) == "3" and fixed(-0.0001, 2) == "0.00"
    assert num(99.95) == "100" and num(1.5) == "1.5" and num(2.0) == "2"


def test_a_whole_count_prints_every_digit():
    assert num(2345678.0) == "2,345,678" and fmt(2345678.0) == "2,345,678"


def _two_modes():
    """postgres's via-group check: 800 ops in its default mode at 1 ms, 3,000 more in a second mode at 5
    ms."""
    from tests.unit.test_report_findings import NET, Run, steady

    run = Run().server("postgres", NET).phase("postgres", "check_view_via_group_member", steady(1.0))
    run.phase("postgres", "check_view_via_group_member", steady(5.0, n=750), repeat=1)
    start = next(r for r in reversed(run.recs) if r["type"] == "phase_start")
    start["consistency"] = "fully_consistent"
    return run.data()


def test_a_reads_rows_ops_are_the_ops_its_percentiles_rest_on(tmp_path):
    from authzbench.report import reads

    text = reads.section(_two_modes(), tmp_path)
    row = next(ln for ln in text.splitlines() if ln.startswith("| postgres | 1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "800" and cells[4] == "1.000", cells  # not 3,800 ops beside the default mode's p50


def test_a_mixed_check_p95_prints_at_one_precision_in_the_mixed_table_and_the_slo_verdicts(tmp_path):
    from authzbench.report import mixed
    from tests.unit.test_report_findings import NET, Run

    # at 4 decimals the verdicts read 0.5000 where the mixed table read 0.500 (the example: 0.9005 and 0.900)
    run = Run().server("postgres", NET).phase("postgres", "mixed", [[0.5] * 190 + [0.9005] * 10] * 4,
                                              writes=[2.0] * 30)
    text = mixed.section(run.data(), tmp_path)
    table_row, verdict_row = [ln for ln in text.splitlines() if ln.startswith("| postgres | closed | 1 |")
                              and ("| check |" in ln or "PASS" in ln or "FAIL" in ln)]
    p95 = [c.strip() for c in table_row.strip("|").split("|")][8]
    assert [c.strip() for c in verdict_row.strip("|").split("|")][4] == p95, (table_row, verdict_row)


def test_a_folded_document_keeps_its_code_whole_and_every_other_line_within_400_characters():
    from authzbench.report.core.fold import fold

    prose, row, code = "word " * 100, "| " + " | ".join(["cell " * 10] * 12) + " |", "x" * 500
    out = fold("\n".join([prose, "", row, "", "```", code, "```"])).split("\n")
    assert code in out and all(len(ln) <= 400 for ln in out if ln != code)
    assert " ".join(out[:out.index("")]).split() == prose.split()


def _lags() -> list:
    from authzbench.report.writes import _lag

    def kinds(ms: float) -> pd.DataFrame:  # three write kinds, the worst at ms, each on 64 ops a round
        return pd.DataFrame({"vis_p95_ms": [ms / 2, ms, ms / 3], "vis_ops": [64] * 3, "vis_fewest": [64] * 3})

    return [_lag("postgres", kinds(0.101)), _lag("permify", kinds(0.156)), _lag("openfga", kinds(5042.0))]


def test_a_ratio_to_a_base_within_its_resolution_of_zero_is_a_floor_not_a_figure():
    from authzbench.report.core.ranking import Dimension
    from authzbench.report.findings import ranking_text

    d = Dimension("Writes", "Visibility lag p95", "ms", False, _lags(), "t-x")
    text = ranking_text(d.figures, d, str)
    # postgres 0.101 ms polled every 1 ms (0-1.101): openfga's 5,042 is more than 4,579 times it, not ×49,923
    assert "×49,923" not in text and ">×4,579" in text, text
    assert "**permify** 0.156 ms" in text and "×1.54" not in text, text  # 0.156 against 0-1.101: no ratio


def test_a_ratio_to_a_base_clear_of_zero_is_the_figures_ratio():
    from authzbench.report.core.tables import ratio_from_zero

    assert ratio_from_zero((1.0, 1.2), (5.0, 5.5), False) is None
    # higher is better: the other is the base
    assert ratio_from_zero((100.0, 120.0), (0.0, 2.0), True) == ">÷50"


def test_a_heatmap_cell_carries_the_too_few_mark_its_summary_cell_carries():
    from types import SimpleNamespace

    from authzbench.report import decision
    from tests.unit.test_report_findings import CASS, NET, Run, steady

    run = (Run().server("postgres", NET).server("scylla", CASS)
           .phase("postgres", "check_manage_direct_user", steady(1.0))
           .phase("scylla", "check_manage_direct_user", steady(3.0, n=3)))  # 12 ops: a p95 needs more
    rd = run.data()
    d = next(x for x in dimensions.compute(rd) if x.title.startswith("Check p95, check_manage_direct_user"))
    _, _, _, texts, _ = decision._matrix(rd, [(SimpleNamespace(label="p95"), d)], ["postgres", "scylla"])
    row = decision._row(rd, SimpleNamespace(label="p95"), d, ["postgres", "scylla"])
    assert texts[0][1].endswith(" ⚠") and not texts[0][0].endswith("⚠") and "⚠" in row.split("|")[-2], (
        texts, row)


def _section_of(md: str, anchor: str) -> str:
    """The heading of the section an anchor sits in."""
    before = md[:md.index(f'<a id="{anchor}"></a>')]
    return [ln for ln in before.splitlines() if ln.startswith("## ")][-1]


def test_the_mixed_and_churn_anchors_sit_at_their_tables_not_above_the_reads_table(tmp_path):
    from tests.unit.test_report_churn import SLOWING, sweep
    from tests.unit.test_report_findings import steady

    run = sweep(SLOWING)
    for b in SLOWING:
        run.phase(b, "check_manage_direct_user", steady(1.0))
        run.phase(b, "mixed", steady(2.0), writes=[2.0] * 30)
    render(run.write(tmp_path / "run"), tmp_path / "out")
    main = (tmp_path / "out" / "fixture.md").read_text()
    appendix = (tmp_path / "out" / "fixture-appendix.md").read_text()
    assert _section_of(main, "t-check-manage-direct-user") == "## 5. Reads"
    assert _section_of(main, "t-mixed") == "## 6. Mixed load"
    assert _section_of(main, "t-churn") == "## Decision summary"
    assert main.index('<a id="t-churn"></a>') < main.index("**Sustainable churn**")
    assert _section_of(appendix, "t-churn") == "## Structural churn"
    assert main.count('<a id="t-mixed"></a>') == main.count('<a id="t-churn"></a>') == 1


def _killed_in_elasticsearchs_first_phase():
    """`bench --backend postgres,elasticsearch` killed (-9) during Elasticsearch's first phase: postgres's
    phases ended, the progress record after its visit says 2 of 4 steps, Elasticsearch's first phase has a
    start and intervals and no end, and nothing after it was written."""
    from tests.unit.test_report_findings import ES, NET, Run, steady

    run = Run().server("postgres", NET)
    run.phase("postgres", "check_manage_direct_user", steady(1.0)).phase(
        "postgres", "check_negative", steady(1.0))
    run.recs.append(
        {"type": "eta", "done": 2, "total": 4, "elapsed_s": 60.0, "left_s": 60.0, "overhead_s": 1.0})
    run.server("elasticsearch", ES).phase("elasticsearch", "check_manage_direct_user", steady(2.0))
    run.recs = [r for r in run.recs if not (r["type"] == "phase_end" and r["backend"] == "elasticsearch")]
    manifest = run.manifest()
    manifest["config"].update(backends=["postgres", "elasticsearch", "mongo"],
                              scenarios=["check_manage_direct_user", "check_negative"])
    run.manifest = lambda: manifest
    return run


def test_a_killed_runs_report_says_on_its_first_line_that_it_ended_early_and_what_it_never_measured(tmp_path):
    render(_killed_in_elasticsearchs_first_phase().write(tmp_path / "run"), tmp_path / "out")
    main = (tmp_path / "out" / "fixture.md").read_text().splitlines()
    first = next(ln for ln in main[1:] if ln.strip())
    assert first.startswith("**This run ended early**"), first
    assert "2 of its 4 planned steps" in first, first
    assert "elasticsearch's `check_manage_direct_user` phase at 1 worker was cut" in first, first
    assert ("never measured: mongo (nothing); elasticsearch's `check_manage_direct_user`, `check_negative`"
            in first)
    assert any(ln.startswith("Backends measured: postgres.") for ln in main), [ln[:80] for ln in main[:8]]


def test_a_run_that_ran_its_whole_plan_has_no_ended_early_line():
    from authzbench.report.overview import ended_early
    from tests.unit.test_report_findings import two_backends

    run = two_backends(1.0, 2.0)
    run.recs.append(
        {"type": "eta", "done": 2, "total": 2, "elapsed_s": 60.0, "left_s": 0.0, "overhead_s": 1.0})
    assert ended_early(run.data()) == ""
