"""What the charts are built from (issue 55, item 6), checked on the figures before they are saved, not on
pixels: the worker counts an axis names, where an SLO line is drawn, which backends a chart names as having
no line and why, which bars carry ⚠, and that every backend keeps its fixed colour in every topic's chart."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from authzbench.report import reads, reads_chart, writes, writes_chart
from authzbench.report.core import charts
from authzbench.report.core.data import load_run
from authzbench.report.core.figures import cell
from authzbench.report.sweep import chart, scaling
from tests.unit.test_report_findings import CASS, NET, Run, steady

CHECK, HEAVY = "check_manage_direct_user", "lookup_resources_manage_super"
EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "data" / "20261128-083444"
SKIP_REASON = "predicted 72 s an op, over its 60 s timeout"


@pytest.fixture
def drawn(monkeypatch):
    """The figures the charts would save, by chart name, kept open for the test to read."""
    figs: dict[str, plt.Figure] = {}

    def keep(fig, chart_dir, name, tight=True):
        figs[name] = fig
        return f"{chart_dir.name}/{name}.png"

    for module in (charts, reads_chart, writes_chart):  # each topic's chart module saves through its own name
        monkeypatch.setattr(module, "_save", keep)
    yield figs
    for f in figs.values():
        plt.close(f)


def _swept() -> Run:
    """Checks at 1 and 8 workers; a heavy lookup postgres ran at both, permify once at 1 worker (one op) and
    not at 8 (a phase_skipped record, as the runner writes it)."""
    run = Run().server("postgres", NET).server("permify", CASS)
    for b, ms in (("postgres", 0.5), ("permify", 2.0)):
        for c in (1, 8):
            run.phase(b, CHECK, steady(ms * c, n=50 * c, slots=2), concurrency=c)
    run.phase("postgres", HEAVY, steady(8.0, n=20, slots=2), kind="lookup")
    run.phase("postgres", HEAVY, steady(30.0, n=20, slots=2), kind="lookup", concurrency=8)
    run.phase("permify", HEAVY, [[18_000.0]], kind="lookup")
    run.recs.append({"type": "phase_skipped", "phase": f"permify/{HEAVY}/c8/r0", "backend": "permify",
                     "scenario": HEAVY, "concurrency": 8, "repeat": 0, "reason": SKIP_REASON, "ts": run.t})
    return run


def test_the_latency_throughput_axis_names_only_worker_counts_that_ran_and_no_slo_on_check_phases(
    drawn, tmp_path):
    rd = _swept().data()
    pts = {b: reads.sweep(rd, b, CHECK) for b in ("postgres", "permify")}
    assert reads_chart.latency_vs_throughput(rd, CHECK, pts, 25.0, tmp_path)
    ax = drawn[f"{CHECK}-latency-throughput"].axes[0]
    assert reads_chart.swept_workers(rd, CHECK) == [1, 8]
    assert ax.get_xlabel().endswith("1, 8 workers)") and "32" not in ax.get_xlabel()
    assert not [ln for ln in ax.get_lines() if "SLO" in str(ln.get_label())]


def test_the_slo_line_is_drawn_only_on_mixed_phases_and_named_as_the_mixed_load_slo():
    assert reads_chart.slo_line(CHECK, 25.0) is None and reads_chart.slo_line("mixed", None) is None
    assert reads_chart.slo_line("mixed", 25.0) == 25.0
    assert charts.slo_label(25.0) == "mixed-load SLO: check p95 < 25 ms"


def test_a_backend_without_a_lookup_line_is_named_with_its_reason_from_the_records(drawn, tmp_path):
    rd = _swept().data()
    assert reads_chart.absent(rd, HEAVY, [1, 8]) == {("permify", 1): "1 op measured (a line needs 2)",
                                               ("permify", 8): f"not run: {SKIP_REASON}"}
    caption = reads_chart.absent_caption(rd, HEAVY)
    assert caption[:2] == ["- No line for permify at 1 worker: 1 op measured (a line needs 2).",
                           f"- No line for permify at 8 workers: not run: {SKIP_REASON}."]
    assert reads_chart.spectrum(rd, HEAVY, tmp_path)
    notes = [t.get_text() for ax in drawn[HEAVY].axes for t in ax.texts]
    assert notes == ["no line: permify", "no line: permify"]
    assert reads_chart.absent_caption(rd, CHECK) == []  # every backend drawn: nothing to say


def test_the_committed_examples_heavy_lookup_chart_names_permify_and_why():
    rd = load_run(EXAMPLE)
    missing = reads_chart.absent(rd, HEAVY, reads_chart.swept_workers(rd, HEAVY))
    assert {b for b, _ in missing} == {"permify"}
    assert "not run: predicted" in missing[("permify", 8)]


def _writes() -> Run:
    """One write kind: postgres with 25 writes a phase (enough for a p95), scylla with 3 (too few)."""
    run = Run().server("postgres", NET).server("scylla", CASS)
    for b, n in (("postgres", 25), ("scylla", 3)):
        run.phase(b, "write_membership", steady(1.0, n=10, slots=1), kind="visibility", writes=[4.0] * n,
                  extra={"rows": 10, "rows_counted": n, "stale_allows": 0})
    return run


def test_structural_write_bars_carry_the_too_few_mark_of_their_figure(drawn, tmp_path):
    rd = _writes().data()
    df = writes.write_table(rd)
    bars = writes_chart.write_bars(rd, df, "write_p95_ms")["write_membership"]
    for b, few in (("postgres", False), ("scylla", True)):
        assert bars[b][1] is few
        assert cell(rd, b, "write_membership", 1, "p95_ms", "write").too_few is few
    assert writes_chart.structural_writes(rd, df, tmp_path)
    marks = [t for t in drawn["structural_writes"].axes[0].texts if t.get_text() == "⚠"]
    assert len(marks) == 1


def test_structural_write_and_size_sweep_charts_use_each_backends_fixed_colour(drawn, tmp_path):
    rd = _writes().data()
    writes_chart.structural_writes(rd, writes.write_table(rd), tmp_path)
    for bar in drawn["structural_writes"].axes[0].patches:
        b = bar.get_label().removesuffix(" †")
        if b in ("postgres", "scylla"):
            assert bar.get_facecolor() == to_rgba(charts.colour(b))
    df = pd.DataFrame({"backend": ["postgres", "postgres", "scylla", "scylla"],
                       "relationships": [1e5, 1e6] * 2,
                       **{m: [1.0, 2.0, 3.0, 4.0] for m in scaling.MEASURES}})
    out = chart.size_sweep(rd, df, {"rows": "rows written"}, tmp_path)
    assert list(out) == ["rows"]
    lines = {ln.get_label().removesuffix(" †"): ln for ln in drawn["scaling-rows"].axes[0].get_lines()}
    for b in ("postgres", "scylla"):
        assert to_rgba(lines[b].get_color()) == to_rgba(charts.colour(b)) and lines[
            b].get_marker() == charts.marker(b)
