"""The report's own rules, checked on a report rendered from recorded results (fixture records, no servers):
two figures share a letter exactly when not clearly apart, the summary and the Findings show the figure its
table shows, one (backend, scenario, workers, metric) has one value, the main report stays short with the
decision first."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from authzbench.core.records import Server
from authzbench.report import decision, dimensions, mixed
from authzbench.report.core import ranking
from authzbench.report.core.data import RunData
from authzbench.report.core.figures import cell, letters, standing
from authzbench.report.core.tables import significant
from authzbench.report.document import render
from tests.unit.test_report_findings import CASS, CHDB, ES, NET, Run, steady

BACKENDS = {
    "postgres": (NET, 0.2), "scylla": (CASS, 0.7), "elasticsearch": (ES, 1.1), "clickhouse": (CHDB, 4.0)}


def _recorded_run() -> Run:
    """Three rounds of every default read scenario at 1 and 8 workers, the mixed load, ingest and writes."""
    run = Run()
    rng = np.random.default_rng(7)
    for b, (info, ms) in BACKENDS.items():
        run.server(b, info, model="thread" if b == "clickhouse" else "process").ingest(b, 2.0 + ms)
        for rnd in range(3):
            wobble = 1 + 0.2 * rng.random()
            run.phase(b, "roundtrip", steady(ms * 0.6 * wobble, slots=2), repeat=rnd)
            for s in ("check_manage_direct_user", "check_view_via_group_member", "check_negative"):
                for c in (1, 8):
                    run.phase(
                        b, s, steady(ms * wobble * (1 + c / 4), n=100 * c, slots=2), concurrency=c, repeat=rnd
                    )
            run.phase(
                b, "lookup_resources_view_regular", steady(ms * 20 * wobble, n=30, slots=2), kind="lookup",
                results=50, repeat=rnd)
            for c in (1, 8):
                run.phase(b, "mixed", steady(ms * wobble * c, n=100 * c, slots=2), concurrency=c, repeat=rnd,
                          writes=[ms * 3] * 30)
        run.phase(b, "write_membership", steady(ms, n=10, slots=1), kind="visibility", writes=[ms * 40] * 25,
                  extra={"rows": 250, "rows_counted": 25, "stale_allows": 0})
    return run


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("inv")
    run = _recorded_run()
    path = render(run.write(root / "run"), root / "out")
    return run, path


def _assert_letter_meaning(figs: list, higher: bool, where: object = "") -> None:
    """Both directions of "sharing a letter = not clearly apart" for every pair, and a better figure never a
    later first letter; clearly better is checked on the measured intervals here, not through figures.py."""
    def beats(a, b) -> bool:
        if a.assumed or b.assumed:
            return False
        (alo, ahi), (blo, bhi) = a.interval(), b.interval()
        apart = max(ahi, a.value) < min(blo, b.value) or max(bhi, b.value) < min(alo, a.value)
        return apart and (a.value > b.value) == higher

    cld = letters(figs, higher)
    assert set(cld) == {f.backend for f in figs}  # none dropped
    for f in figs:
        for g in figs:
            if g is not f:
                share = bool(set(cld[f.backend]) & set(cld[g.backend]))
                assert share == (not beats(f, g) and not beats(g, f)), (where, f.backend, g.backend, cld)
                if (f.value > g.value) == higher and f.value != g.value:
                    assert standing(cld[f.backend]) <= standing(cld[g.backend]), (
                        where, f.backend, g.backend, cld)


def test_every_rendered_letter_means_not_clearly_apart_and_follows_the_figures_order(rendered):
    run, _ = rendered
    rd = run.data()
    for d in dimensions.compute(rd):
        for figs in ranking.split(d, rd):
            _assert_letter_meaning([f for f in figs if not f.text], d.higher_is_better, d.title)


def test_every_figure_in_the_summary_and_findings_equals_its_tables(rendered):
    run, path = rendered
    rd = run.data()
    table = json.loads(path.with_suffix(".json").read_text())["figures"]
    by_key = {(f["dimension"], f["backend"]): f for f in table}
    for d in dimensions.compute(rd):
        for f in d.figures:
            assert by_key[(d.key, f.backend)]["value"] == significant(f.value)  # the JSON keeps 6 digits
    # a check p50 of the Findings is the per-phase table's cell and the comparison table's
    appendix = path.with_name(f"{path.stem}-appendix.md").read_text()
    section = appendix.split("### `check_negative`")[1].split("####")[0]
    row = next(ln for ln in section.splitlines() if ln.startswith("| postgres | 1 |"))
    p50 = float(row.strip("|").split("|")[4])
    assert p50 == pytest.approx(cell(rd, "postgres", "check_negative", 1, "p50_ms").value, abs=0.0005)
    assert by_key[("check_p50/check_negative", "postgres")]["value"] == pytest.approx(p50, abs=0.0005)


def test_no_backend_scenario_workers_metric_shows_two_values(rendered):
    run, path = rendered
    rd = run.data()
    text = path.read_text() + path.with_name(f"{path.stem}-appendix.md").read_text()
    # every printed best-throughput figure of a backend and scenario is the one computed figure
    for b in BACKENDS:
        for s in ("check_manage_direct_user", "check_negative"):
            rate = cell(rd, b, s, 8, "ops_per_s").value
            shown = {f"{rate:,.0f}", f"{rate:.1f}"}
            hits = [ln for ln in text.splitlines() if b in ln and s in ln and "/s" in ln]
            for ln in hits:
                nums = set(re.findall(r"([\d,]+(?:\.\d)?)/s", ln))
                assert not nums or nums & shown, (b, s, ln)
    summary = text.split("## Decision summary")[1].split("## Findings")[0]
    cells = [ln for ln in summary.splitlines() if ln.startswith("| Mixed load within the SLO")]
    dim = mixed.mixed_closed(rd)[0]
    for f in dim.figures:
        assert f"{f.value:,.0f}" in cells[0]


def test_the_main_report_is_short_with_the_decision_in_its_first_60_lines(rendered):
    _, path = rendered
    lines = path.read_text().splitlines()
    assert len(lines) < 400
    start = next(i for i, ln in enumerate(lines) if ln == "## Decision summary")
    end = next(i for i, ln in enumerate(lines) if ln == "## Findings")
    assert start < 15 and end <= 60
    prose = [ln for ln in lines if not ln.startswith(("|", "![", "<a "))]
    assert max(map(len, prose)) <= 400
    for need in ("Check p50", "Check throughput", "Lookup p95, regular user", "Mixed load",
                 "Group-membership write p95", "Rows touched", "Visibility lag", "Stale allows", "Ingest",
                 "Footprint", "Peak server memory", "Server CPU"):
        assert any(ln.startswith(f"| {need}") for ln in lines[start:end]), need


def test_each_sentence_of_the_summary_names_the_best_or_says_there_is_no_clear_winner(rendered):
    _, path = rendered
    summary = path.read_text().split("## Decision summary")[1].split("**What would change")[0]
    sentences = [ln for ln in summary.splitlines() if ln.startswith("- **")]
    assert len(sentences) >= 10
    for s in sentences:
        assert ("is best, clearly" in s or "no clear winner" in s or "only" in s or "none qualified" in s
                or "no difference is claimed" in s), s


@pytest.mark.parametrize("seed", range(60))
def test_random_intervals_give_letters_shared_exactly_when_not_clearly_apart(seed):
    """Property over random figures: sharing a letter <=> not clearly apart, a better figure never a later
    first letter; with wide, nested, open-above (a percentile from too few ops), tied and assumed intervals,
    so a wide interval that used to chain a group together is among the cases."""
    rng = np.random.default_rng(seed)
    figs = []
    for i in range(int(rng.integers(2, 14))):
        v = float(rng.choice([1.0, 2.0])) if rng.random() < 0.15 else float(rng.lognormal(0, 1))
        lo, hi = v * float(rng.uniform(0.3, 1.0)), v * float(rng.uniform(1.0, 3.0))
        hi = math.inf if rng.random() < 0.15 else hi
        figs.append(ranking.Figure(f"b{i}", v, bounds=(lo, hi), unstable=bool(rng.random() < 0.2),
                                   basis="assumed: test" if rng.random() < 0.1 else ""))
    for higher in (False, True):
        _assert_letter_meaning(figs, higher, seed)


def test_one_wide_interval_no_longer_joins_two_figures_far_apart():
    """permify [1.97, 4.58], a wide one over both, postgres [5.96, 12.7]: permify stays clearly ahead of
    postgres, and the wide one shares a letter with each, neither claim broken."""
    figs = [
        ranking.Figure("permify", 3.0, bounds=(1.97, 4.58)), ranking.Figure("wide", 5.0, bounds=(2.0, 9.0)),
        ranking.Figure("postgres", 8.0, bounds=(5.96, 12.7))]
    assert letters(figs, False) == {"permify": "a", "wide": "ab", "postgres": "b"}


def test_the_decision_needs_cover_the_issue_list():
    labels = [n.label for n in decision.NEEDS]
    for need in ("Check p50", "Check throughput", "Lookup p95, heavy user", "Lookup p95, regular user",
                 "Mixed load", "Group-membership write", "Hierarchy write", "Visibility lag", "Stale allows",
                 "Ingest", "Footprint", "Peak server memory", "CPU per 1,000 checks"):
        assert any(label.startswith(need) or need in label for label in labels), need


def test_a_count_of_one_takes_the_singular_noun():
    from authzbench.report.core.tables import counted
    assert counted("1", "row") == "1 row" and counted("1", "worker") == "1 worker"
    assert counted("1,041", "row") == "1,041 rows" and counted("1, 8", "worker") == "1, 8 workers"


def test_a_backend_whose_answers_can_be_stale_gets_one_line_with_its_lag_and_its_stale_allows():
    from authzbench.report.core.ranking import Dimension, Figure
    from authzbench.report.decision import NEEDS, _freshness

    need = {n.keys: n for n in NEEDS}
    lag = Dimension(
        "Writes", "lag", "ms", False, [Figure("a", 5000.0), Figure("b", 0.2), Figure("c", 4000.0)], "x")
    stale = Dimension(
        "Writes", "stale", "", False, [Figure("a", 6.0), Figure("b", 0.0), Figure("c", 0.0)], "x")
    rd = RunData(Path("."), {}, [])
    lines = _freshness(rd, [(need[("visibility_p95",)], lag), (need[("stale_allows/",)], stale)])
    assert len(lines) == 2 and lines[0].startswith(
        "- **a** answers can be stale: visibility lag p95 5,000 ms")
    assert "stale allows 6" in lines[0] and "stale allows" not in lines[1]  # c: its lag only; b: fresh


def test_figures_that_moved_most_put_an_undefined_ratio_last_and_a_drop_to_zero_first():
    from authzbench.report.compare import _move
    assert _move(float("nan")) < _move(1.0) < _move(1.3) == _move(1 / 1.3) < _move(0.0)


def _servers_run() -> RunData:
    info = {
        "scylla": {"engine": "Apache Cassandra", "label": "Cassandra 5.0.9 (CQL, standing in for ScyllaDB)"},
        # as recorded until now
        "mongo": {"engine": "FerretDB", "label": "FerretDB 1.24", "comparable": False},
        "mongo-new": {"engine": "FerretDB", "label": "FerretDB 1.24", "stands_in_for": "MongoDB"},
        "clickhouse": {
            "engine": "ClickHouse", "label": "ClickHouse 26.9 embedded (chdb)", "comparable": False},
        "postgres": {"engine": "PostgreSQL", "label": "PostgreSQL 15.18"}}
    rd = RunData(Path("."), {}, [])
    rd.servers = {b: Server(backend=b, mode="native", info=i, notes=[], concurrency_model="process")
                  for b, i in info.items()}
    return rd


def test_every_stand_in_product_is_marked_apart_from_an_embedded_engine_and_the_real_servers():
    from authzbench.report.core.tables import label
    rd = _servers_run()
    assert [label(rd, b) for b in rd.servers] == [
        "scylla ‡", "mongo ‡", "mongo-new ‡", "clickhouse †", "postgres"]
    # a stand-in is a networked server: lettered with the servers; an embedded engine is lettered apart
    assert [rd.comparable(b) for b in rd.servers] == [True, True, True, False, True]


def test_the_summary_says_what_each_stand_ins_figures_may_not_be_used_for():
    from authzbench.report.decision import _stand_ins
    lines = _stand_ins(_servers_run())
    assert len(lines) == 4 and "may not be used as ScyllaDB's latency" in lines[0]
    assert "may not be used as MongoDB's" in lines[1] and "may not be used as MongoDB's" in lines[2]
    assert lines[3].startswith("- † clickhouse") and "lettered apart" in lines[3]


def test_the_heatmap_colours_one_meaning_alike_in_every_row_whatever_the_row_holds():
    from authzbench.report.decision_chart import UNRANKED, cell_colour

    # row A first letters a..b, row B a..f: first letter b is one colour in both
    rows = {"A": [1, 2], "B": [1, 2, 3, 4, 5, 6]}
    for k in (1, 2):
        assert len({cell_colour(r[k - 1], False, False) for r in rows.values()}) == 1
    assert cell_colour(1, False, False) != cell_colour(2, False, False)
    assert cell_colour(1, True, False) == UNRANKED == cell_colour(None, False, False)  # none qualified: grey
    # † distinct
    assert cell_colour(1, False, True) not in {cell_colour(k, False, False) for k in range(1, 7)}


def test_the_rendered_heatmap_cells_are_coloured_by_their_first_letter(rendered, monkeypatch):
    from authzbench.report import decision_chart

    run, _ = rendered
    rd = run.data()
    monkeypatch.setattr(decision_chart, "_save", lambda fig, d, name: name)
    picked = decision.rows(rd, dimensions.compute(rd))
    needs, backends, ranks_, texts, stand_in = decision._matrix(rd, picked, decision._backends(rd, picked))
    assert decision_chart.decision_heatmap((needs, backends, ranks_, texts, stand_in), rd.path,
                                           "x") == "decision"
    for i, row in enumerate(ranks_):
        for j, k in enumerate(row):
            colour = decision_chart.cell_colour(standing(k) if k else None, texts[i][j] == "none",
                                                stand_in[j])
            if k is not None and texts[i][j] != "none" and not stand_in[j]:
                assert colour == decision_chart.RANK_COLOURS[min(standing(k), 4) - 1]
            elif k is None or texts[i][j] == "none":
                assert colour == decision_chart.UNRANKED
