"""Findings, noise, sample sizes, † separation, validity and the reference side by side, on fixture records
(no servers): every figure is built here from latencies we choose, so the expected ranking is known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from authzbench.core.metrics import encode, new_histogram
from authzbench.report import dimensions, findings
from authzbench.report import writes as writes_topic
from authzbench.report.core import ranking
from authzbench.report.core.data import from_records
from authzbench.report.core.tables import anchor
from authzbench.report.document import render

NET = {"label": "PostgreSQL 15.18 (Debian, native)", "version": "15.18", "comparable": True, "notes": []}
CASS = {"label": "Cassandra 5.0.9 (CQL, standing in for ScyllaDB)", "version": "5.0.9", "comparable": True,
        "notes": []}
ES = {"label": "Elasticsearch 7.17.29 OSS", "version": "7.17.29", "comparable": True, "notes": []}
CHDB = {
    "label": "ClickHouse 26.9.2.1 embedded (chdb)", "version": "26.9.2.1", "comparable": False, "notes": []}


class Run:
    """Builds the records a bench writes: servers, ingest, phases with per-second intervals, monitor
    samples."""

    def __init__(self) -> None:
        self.recs: list[dict] = []
        self.t = 1_000_000.0

    def server(self, b: str, info: dict, model: str = "process") -> Run:
        self.recs.append({"type": "server", "backend": b, "mode": "native", "info": info, "notes": [],
                          "concurrency_model": model})
        return self

    def ingest(self, b: str, seconds: float, footprint: int = 10_000_000, rels: int = 100_000) -> Run:
        self.recs.append({"type": "ingest", "backend": b, "variant": None, "relationships": rels,
                          "acl_relationships": rels, "rows": 2 * rels, "documents": None, "batch_rows": 1000,
                          "batch_seconds": [seconds / 10] * 10, "load_seconds": seconds, "build": None,
                          "build_seconds": 0.0, "footprint_bytes": footprint, "notes": {}})
        return self

    def phase(
        self, b: str, scenario: str, slots: list[list[float]], concurrency: int = 1, kind: str = "check",
        repeat: int = 0, results: int = 0, cpu: float = 50.0, client_cpu: float = 30.0,
        writes: list[float] | None = None, extra: dict | None = None) -> Run:
        """slots: the latencies (ms) recorded in each one-second interval of the phase."""
        pid = f"{b}/{scenario}/c{concurrency}/r{repeat}"
        t0 = self.t
        self.t += len(slots) + 5
        self.recs.append(
            {"type": "phase_start", "phase": pid, "backend": b, "scenario": scenario, "mode": "closed",
             "concurrency": concurrency, "repeat": repeat, "stages": [], "ts": t0,
             "iterations": sum(map(len, slots)), "budget_s": None})
        for i, lat in enumerate(slots):
            h = new_histogram()
            for ms in lat:
                h.record_value(max(1, int(ms * 1000)))
            self.recs.append(
                {"type": "interval", "phase": pid, "backend": b, "scenario": scenario, "worker": 0,
                 "kind": kind, "hist": encode(h), "ops": len(lat), "errors": {}, "timeouts": 0,
                 "mismatches": 0, "examples": [], "results": results * len(lat), "duplicates": 0,
                 "checked": len(lat), "late": 0, "ts": t0 + i + 0.99})
            self.recs.append({"type": "monitor", "backend": b, "phase": pid, "cpu_percent": cpu,
                              "rss_bytes": 300 * 2**20, "client_cpu_percent": client_cpu, "processes": 1})
        if writes:
            h = new_histogram()
            for ms in writes:
                h.record_value(int(ms * 1000))
            self.recs.append(
                {"type": "interval", "phase": pid, "backend": b, "scenario": scenario, "worker": 0,
                 "kind": "write", "hist": encode(h), "ops": len(writes), "errors": {}, "timeouts": 0,
                 "mismatches": 0, "examples": [], "results": 0, "duplicates": 0, "checked": 0, "late": 0,
                 "ts": t0 + 0.99, "extra": extra or {}})
        n = sum(map(len, slots))
        self.recs.append(
            {"type": "phase_end", "phase": pid, "backend": b, "scenario": scenario, "status": "complete",
             "reason": "", "wall_s": float(len(slots)), "scheduled": None, "dropped": 0, "warmup_ops": 10,
             "ops": n})
        return self

    def manifest(self) -> dict:
        return {"run_id": "fixture", "environment": {"cpu_logical": 2},
                "config": {"slo": {"check_p95_ms": 25.0, "write_p95_ms": 100.0, "success": 0.999}},
                "dataset": {"profile": "baseline", "model": "rebac", "relationships": 100_000}}

    def data(self):
        return from_records(Path("fixture"), self.manifest(), self.recs)

    def write(self, root: Path) -> Path:
        root.mkdir(parents=True, exist_ok=True)
        (root / "manifest.json").write_text(json.dumps(self.manifest()))
        (root / "records.jsonl").write_text("\n".join(json.dumps(r) for r in self.recs) + "\n")
        return root


def steady(ms: float, n: int = 200, slots: int = 4) -> list[list[float]]:
    """n ops per slot, all within 1% of ms: a figure with almost no spread."""
    return [[ms * (1 + 0.01 * (i % 3 - 1)) for i in range(n)] for _ in range(slots)]


def _dim(rd, title_start: str) -> ranking.Dimension:
    return next(d for d in dimensions.compute(rd) if d.title.startswith(title_start))


def _groups(figs: list[ranking.Figure], higher_is_better: bool) -> list[list[ranking.Figure]]:
    """The figures best first, those showing the same letters together."""
    out: list[list[tuple[ranking.Figure, str]]] = []
    for f, cld in ranking.lettered(figs, higher_is_better):
        if out and out[-1][0][1] == cld:
            out[-1].append((f, cld))
        else:
            out.append([(f, cld)])
    return [[f for f, _ in g] for g in out]


def _order(rd, title_start: str) -> list[list[str]]:
    d = _dim(rd, title_start)
    net, _ = ranking.split(d, rd)
    return [[f.backend for f in t] for t in _groups(net, d.higher_is_better)]


def two_backends(a_ms: float, b_ms: float) -> Run:
    return (Run().server("postgres", NET).server("scylla", CASS)
            .phase("postgres", "check_manage_direct_user", steady(a_ms))
            .phase("scylla", "check_manage_direct_user", steady(b_ms)))


def test_a_ranking_follows_the_data_and_swaps_when_the_figures_swap():
    assert _order(two_backends(1.0, 3.0).data(), "Check p95, check_manage_direct_user") == [
        ["postgres"], ["scylla"]]
    assert _order(two_backends(3.0, 1.0).data(), "Check p95, check_manage_direct_user") == [
        ["scylla"], ["postgres"]]
    text = findings.render_section(two_backends(1.0, 3.0).data(), str)
    line = next(ln for ln in text.splitlines() if "Check p95, check_manage_direct_user" in ln)
    assert line.index("postgres") < line.index("scylla") and "×3" in line


def test_ratios_are_to_the_best_and_throughput_ranks_higher_first():
    run = two_backends(1.0, 4.0)
    # the slower backend also gets fewer ops per second
    d = _dim(run.data(), "Check p50, check_manage_direct_user")
    best, other = _groups(d.figures, d.higher_is_better)
    assert ranking.ratio_to_best(best[0].value, other[0].value, False) == pytest.approx(4.0, rel=0.03)
    fast = Run().server("postgres", NET).server("scylla", CASS)
    fast.phase("postgres", "check_negative", steady(1.0, n=100), concurrency=8)
    fast.phase("scylla", "check_negative", steady(1.0, n=400), concurrency=8)
    assert _order(fast.data(), "Throughput at 8 workers, check_negative") == \
        [["scylla"], ["postgres"]]


def test_a_difference_inside_the_interval_to_interval_noise_is_no_clear_difference():
    # Each second alternates between 1 ms and 3 ms: a 5% gap between the two backends is noise.
    noisy = [[1.0] * 100 if i % 2 else [3.0] * 100 for i in range(6)]
    run = (Run().server("postgres", NET).server("scylla", CASS)
           .phase("postgres", "check_negative", noisy)
           .phase("scylla", "check_negative", [[x * 1.05 for x in s] for s in noisy]))
    assert _order(run.data(), "Check p95, check_negative") == [["postgres", "scylla"]]
    text = findings.render_section(run.data(), str)
    line = next(ln for ln in text.splitlines() if "Check p95, check_negative" in ln)
    assert "**postgres** 3 (a); **scylla** 3.15 ×1.05 (a)" in line  # one letter: no clear difference
    # The same gap between two steady backends is a ranking.
    assert _order(two_backends(1.0, 1.05).data(), "Check p95, check_manage_direct_user") == \
        [["postgres"], ["scylla"]]


def test_a_difference_inside_the_spread_across_repeats_is_no_clear_difference():
    run = Run().server("postgres", NET).server("scylla", CASS)
    for rep, (a, b) in enumerate([(1.0, 1.3), (1.4, 1.0), (1.2, 1.2)]):
        run.phase("postgres", "check_negative", steady(a, slots=1), repeat=rep)
        run.phase("scylla", "check_negative", steady(b, slots=1), repeat=rep)
    assert _order(run.data(), "Check p50, check_negative") == [["postgres", "scylla"]]


def test_a_percentile_with_too_few_ops_is_marked_in_tables_and_findings(tmp_path):
    run = (
        Run()
        .server("postgres", NET)
        .server("scylla", CASS)
        .phase("postgres", "lookup_resources_view_regular", [[5.0 + i for i in range(12)]], kind="lookup",
               results=1988)
        .phase(
            "scylla", "lookup_resources_view_regular", steady(6.0, n=50, slots=1), kind="lookup", results=1988
        ))
    text = render(run.write(tmp_path / "run"), tmp_path / "out").read_text()
    appendix = (tmp_path / "out" / "fixture-appendix.md").read_text()
    section = appendix.split("### `lookup_resources_view_regular`")[1].split("####")[0]
    few = next(ln for ln in section.splitlines() if ln.startswith("| postgres |"))
    enough = next(ln for ln in section.splitlines() if ln.startswith("| scylla |"))
    cells = [c.strip() for c in few.strip("|").split("|")]
    assert cells[2] == "12" and cells[5].startswith("⚠") and cells[6].startswith("⚠")  # p95 and p99 of 12 ops
    cells = [c.strip() for c in enough.strip("|").split("|")]
    assert not cells[5].startswith("⚠") and cells[6].startswith("⚠")  # 50 ops: p95 fine, p99 not
    line = next(ln for ln in text.splitlines() if "Lookup p95 (regular user)" in ln)
    assert "⚠ **postgres**" in line
    row = next(ln
               for ln in appendix.splitlines()
               if ln.startswith("| Lookup p95 (regular user)") and "postgres" in ln)
    assert "| 12 |" in row and "too_few" in row  # the appendix's figure table: its op count and flag


def test_dagger_backends_are_ranked_apart_never_with_networked_servers():
    run = (Run().server("postgres", NET).server("scylla", CASS).server("clickhouse", CHDB, model="thread")
           .phase("postgres", "check_negative", steady(2.0)).phase("scylla", "check_negative", steady(4.0))
           .phase("clickhouse", "check_negative", steady(0.5)))
    rd = run.data()
    d = _dim(rd, "Check p95, check_negative")
    net, apart = ranking.split(d, rd)
    assert {f.backend for f in net} == {"postgres", "scylla"} and [f.backend for f in apart] == ["clickhouse"]
    line = next(
        ln for ln in findings.render_section(rd, str).splitlines() if "Check p95, check_negative" in ln)
    ranked, dagger = line.split("† apart:")
    assert ("clickhouse" not in ranked
            and "**postgres** 2.02 (a)" in ranked
            and "**clickhouse** 0.505 (a)" in dagger)


def test_one_more_dimension_is_one_more_function():
    def stale_allows(rd):
        figs = [ranking.Figure("postgres", 0.0, bounds=(0.0, 1.0)),
                ranking.Figure("scylla", 3.0, bounds=(2.0, 4.0))]
        return [ranking.Dimension("Writes", "Stale allows after a revoke", "allows", False, figs,
                                   anchor("revoke_then_check"))]

    rd = two_backends(1.0, 2.0).data()
    dims = dimensions.compute(rd, [*dimensions.DIMENSIONS, stale_allows])
    text = findings.render_section(rd, str, dims=dims)
    assert "- [Stale allows after a revoke (allows)](#t-revoke-then-check), lower is better: " in text
    assert "**postgres** 0 (a); **scylla** 3 >×2 (b)\n" in text  # 2-4 against 0-1: at least twice


def test_figures_without_a_measured_interval_claim_no_difference_however_far_apart():
    """Issue 67: ingest, memory, footprint and rows touched were called "clearly" apart on intervals set by
    hand (2x, 1.25x) or none at all; such figures share a letter and the line says why."""
    def counted(rd):
        figs = [ranking.Figure("postgres", 1.0), ranking.Figure("scylla", 1000.0)]
        return [ranking.Dimension("Writes", "Rows touched", "rows", False, figs, anchor("ingest"))]

    rd = two_backends(1.0, 2.0).data()
    text = findings.render_section(rd, str, dims=dimensions.compute(rd, [counted]))
    assert (
        "**postgres** 1 (a); **scylla** 1,000 ×1,000 (a); one measurement per backend, so no difference is "
        "claimed" in text)
    ingest = (
        Run().server("postgres", NET).server("scylla", CASS).ingest("postgres", 1.0).ingest("scylla", 100.0))
    d = _dim(ingest.data(), "Ingest")
    assert all(f.assumed.startswith("assumed: one measurement") for f in d.figures)
    assert _order(ingest.data(), "Ingest") == [["postgres", "scylla"]]  # 100x apart, one measurement each


def test_stale_allows_are_a_rate_per_1000_revocations_per_writer_count_in_the_named_session_mode():
    # The run that led here: 0 stale allows at 1 worker, 19 at 8, and a Findings line that said 0 (it read
    # the first concurrency level only) beside a table whose consistency column said "—". Then one count
    # summed over writer counts (issue 67): now a rate per 1,000 revocations, one dimension per writer count.
    spice = {**NET, "label": "SpiceDB 1.45 on PostgreSQL 15", "consistency": "fully_consistent"}
    run = Run().server("spicedb-pg", spice).server("postgres", NET)
    for b in ("spicedb-pg", "postgres"):
        for c, stale in ((1, 0), (8, 6 if b == "spicedb-pg" else 0)):
            run.phase(b, "revoke_then_check", steady(2.0, n=10, slots=1), concurrency=c, kind="visibility",
                      writes=[1.0] * 67, extra={"stale_allows": stale, "stale_reads": stale})
    rd = run.data()
    eight = _dim(rd, "Stale allows, own read mode, 8 writers")
    assert {f.backend: (f.base, round(f.value, 1)) for f in eight.figures} == {
        # a record without the count: 1 op each
        "spicedb-pg": ("6 of 67", 89.6), "postgres": ("0 of 67", 0.0)}
    assert eight.unit == "per 1,000 revocations"
    one = _dim(rd, "Stale allows, own read mode, 1 writer")
    assert {f.backend: f.base for f in one.figures} == {"spicedb-pg": "0 of 67", "postgres": "0 of 67"}
    assert _dim(rd, "Visibility lag p95 after a structural write").title.endswith(", 1 worker")

    modes = writes_topic.write_table(rd).set_index(["backend", "concurrency"])["consistency"]
    assert modes[("spicedb-pg", 8)] == "fully_consistent (session)" and modes[("postgres", 8)] == "—"


def _full_run() -> Run:
    run = (Run().server("postgres", NET).server("scylla", CASS).server("elasticsearch", ES)
           .server("clickhouse", CHDB, model="thread")
           .ingest("postgres", 2.0).ingest("scylla", 20.0, footprint=50_000_000).ingest("clickhouse", 1.0))
    for b, ms in (("postgres", 0.1), ("scylla", 0.8), ("elasticsearch", 1.0), ("clickhouse", 2.0)):
        run.phase(b, "roundtrip", steady(ms * 0.5))
        run.phase(b, "check_manage_direct_user", steady(ms))
        run.phase(
            b, "lookup_resources_manage_super", steady(ms * 30, n=40, slots=2), kind="lookup", results=9600)
    return run


def test_the_sections_exist_and_link_to_their_tables(tmp_path):
    text = render(_full_run().write(tmp_path / "run"), tmp_path / "out").read_text()
    appendix = (tmp_path / "out" / "fixture-appendix.md").read_text()
    for heading in ("## Decision summary", "## Findings", "### Checks", "### Lookups"):
        assert heading in text
    for heading in (
        "## Validity and limitations", "## Against the reference report", "## Every ranked figure"):
        assert heading in appendix
    assert (
        text.index("## Decision summary") < text.index("## Findings") < text.index("## 1. Test environment"))
    for target in (
        "t-ingest", "t-check-manage-direct-user", "t-lookup-resources-manage-super", "t-resources"):
        assert f"(#{target})" in text and f'<a id="{target}"></a>' in text
    assert (tmp_path / "out" / "fixture-charts" / "decision.png").is_file()
    render(tmp_path / "run", tmp_path / "out2", against_reference=False)
    assert "## Against the reference" not in (tmp_path / "out2" / "fixture-appendix.md").read_text()


def test_validity_names_the_stand_ins_and_the_clients_cpu_share(tmp_path):
    render(_full_run().write(tmp_path / "run"), tmp_path / "out")
    text = (tmp_path / "out" / "fixture-appendix.md").read_text()
    v = text.split("## Validity and limitations")[1].split("## Against")[0]
    row = next(ln for ln in v.splitlines() if ln.startswith("| scylla |"))
    assert "ScyllaDB 2025.3" in row and "stand-in" in row
    row = next(ln for ln in v.splitlines() if ln.startswith("| postgres |"))
    assert "PostgreSQL 17.2" in row and "same product, other version" in row
    assert "38% (30 / 50)" in v  # client share 30 / (30 + 50), then client % / server %
    assert "Warm-up ops" in v and "120 in all" in v  # 12 phases x 10


def test_the_reference_side_by_side_states_its_defects_next_to_the_cells(tmp_path):
    render(_full_run().write(tmp_path / "run"), tmp_path / "out")
    text = (tmp_path / "out" / "fixture-appendix.md").read_text()
    ref = text.split("## Against the reference report")[1]
    lookups = ref.split("### `lookup_resources_manage_super`")[1].split("###")[0]
    pg = next(ln for ln in lookups.splitlines() if ln.startswith("| postgres |"))
    assert "| 821 | 9,600 | 0 | count 821: its backends disagree" in pg
    assert "returned 62 / 221 / 821 / 9,821 resources on different backends" in lookups
    checks = ref.split("### `check_manage_direct_user`")[1].split("###")[0]
    es = next(ln for ln in checks.splitlines() if ln.startswith("| elasticsearch |"))
    assert "0.000065 ms: no round trip" in es and "~30 samples" in es
    # Elasticsearch's own round trip (0.5 ms), not the fastest backend's (postgres 0.050 ms)
    assert "(the same backend's round trip here, at p50: elasticsearch 0.500 ms)" in checks


def test_the_mixed_verdict_ranks_throughput_at_the_most_workers_that_met_the_slo():
    run = Run().server("postgres", NET).server("scylla", CASS)
    # scylla's checks break the 25 ms SLO at 8 workers
    for c, pg_ms, sc_ms in ((1, 1.0, 2.0), (8, 5.0, 40.0)):
        run.phase("postgres", "mixed", steady(pg_ms, n=100 * c), concurrency=c, writes=[2.0] * 30)
        run.phase("scylla", "mixed", steady(sc_ms, n=100 * c), concurrency=c, writes=[2.0] * 30)
    rd = run.data()
    d = _dim(rd, "Mixed workload (closed loop)")
    assert _order(rd, "Mixed workload (closed loop)") == [["postgres"], ["scylla"]]
    detail = {f.backend: f.detail for f in d.figures}
    assert detail["postgres"] == "up to 8 workers" and detail["scylla"] == "up to 1 worker"


def test_the_mixed_verdict_is_the_median_round_at_each_worker_count_and_the_same_figure_as_the_table():
    run = Run().server("scylla", CASS)
    # 8 workers meet the 25 ms SLO in rounds 0 and 2 (5 ms) and miss it in round 1 (40 ms): its figure, the
    # median over rounds, passes, and the Findings show the 8-worker throughput the mixed table shows
    for rnd, ms8 in ((0, 5.0), (1, 40.0), (2, 5.0)):
        run.phase("scylla", "mixed", steady(2.0, n=100), concurrency=1, repeat=rnd, writes=[2.0] * 30)
        run.phase("scylla", "mixed", steady(ms8, n=800), concurrency=8, repeat=rnd, writes=[2.0] * 30)
    rd = run.data()
    fig = _dim(rd, "Mixed workload (closed loop)").figures[0]
    assert fig.detail == "up to 8 workers" and fig.value == pytest.approx(800, rel=0.01)  # 3,200 ops in 4 s
    from authzbench.report.core.frames import slo_verdicts

    v = slo_verdicts(rd).set_index("concurrency")
    assert v.loc[8, "verdict"] == "PASS" and v.loc[8, "check_ops_per_s"] == fig.value


def test_against_reference_is_a_flag_of_report_and_bench_defaulting_to_the_dataset_rule():
    from authzbench.cli import build_parser

    p = build_parser()
    assert p.parse_args(["report", "r"]).against_reference is None  # None: on for the rebac baseline
    assert p.parse_args(["report", "r", "--no-against-reference"]).against_reference is False
    assert p.parse_args(["bench", "--against-reference"]).against_reference is True


def test_a_percentile_from_one_op_has_an_interval_open_above_not_a_negative_spread():
    from authzbench.report.core.noise import percentile_bounds, percentile_spread

    rd = Run().server("postgres", NET).phase("postgres", "check_negative", [[1.0]]).data()
    assert percentile_bounds(rd.phases, 95, 1.0) == (1.0, math.inf)
    assert percentile_spread(rd.phases, 95) == math.inf


def test_two_p95s_from_one_op_each_are_no_clear_difference_but_one_far_above_a_measured_p95_is():
    from authzbench.report.core.figures import cell, letters

    run = Run()
    for b, ms in (
        ("spicedb-pg", [1.95]), ("openfga", [2.03]), ("postgres", [0.1] * 40), ("scylla", [9.0, 12.0])):
        run.server(b, NET).phase(b, "check_negative", [ms])
    rd = run.data()
    figs = {
        b: cell(rd, b, "check_negative", 1, "p95_ms") for b in ("spicedb-pg", "openfga", "postgres", "scylla")
    }
    assert figs["openfga"].too_few and figs["openfga"].hi == math.inf
    assert figs["scylla"].too_few and figs["scylla"].hi == math.inf  # every too-few percentile: open above
    assert figs["scylla"].lo == pytest.approx(9.0, rel=0.01)

    class F:
        def __init__(self, b):
            self.backend, self.value, self.c = b, figs[b].value, figs[b]

        def interval(self):
            return self.c.lo, self.c.hi

    cld = letters([F(b) for b in figs], higher_is_better=False)
    assert cld == {"postgres": "a", "spicedb-pg": "b", "openfga": "b", "scylla": "b"}


def test_a_size_sweep_adds_its_growth_exponents_when_its_section_is_present(monkeypatch):
    import numpy as np
    import pandas as pd

    from authzbench.report.sweep import runs as sweep

    # a sweep's figures, without running one
    monkeypatch.setattr(sweep, "MEASURES",
                        {"check_p95_ms": "check p95 (ms)", "lookup_p95_ms": "heavy lookup p95 (ms)",
                         "bytes_per_rel": "bytes per relationship"})
    monkeypatch.setattr(sweep, "sweep_runs", lambda rd: [rd, rd])
    rows = [
        {"backend": b, "relationships": n, "check_p95_ms": n**k, "lookup_p95_ms": 1.0, "bytes_per_rel": 1.0}
        for b, k in (("postgres", 0.1), ("scylla", 0.9))
        for n in (1e5, 1e6)]
    monkeypatch.setattr(sweep, "size_table", lambda runs: pd.DataFrame(rows))
    monkeypatch.setattr(sweep, "slope", lambda x, y: float(np.polyfit(np.log(x), np.log(y), 1)[0]))
    rd = two_backends(1.0, 2.0).data()
    # an exponent fitted to one run per size has no interval: shown in order, no difference claimed
    assert _order(rd, "Growth of check p95 (ms) with the dataset") == [["postgres", "scylla"]]
    text = findings.render_section(rd, str)
    assert "### Growth with size" in text and "(#how-cost-grows-with-size)" in text


def test_a_social_open_loop_at_10m_relationships_is_laid_out_as_the_scale_tests_t1_t2_rows(tmp_path):
    run = Run().server("postgres", NET).server("spicedb-pg", NET)
    for b, rate, ms in (("postgres", 1000, 0.5), ("postgres", 10_000, 30.0), ("spicedb-pg", 1000, 4.0)):
        run.phase(b, "social_mixed", steady(ms, n=300, slots=3), concurrency=8, writes=[3.0] * 30)
        start = next(r for r in reversed(run.recs) if r["type"] == "phase_start")
        start.update(mode="open", stages=[[rate, 3.0]], start_rate=rate)
        old = start["phase"]
        for r in run.recs:  # the phase id an open-loop phase has: one per target rate
            if r.get("phase") == old:
                r["phase"] = f"{b}/social_mixed/open8@{rate}/r0"
    manifest = run.manifest()
    manifest["dataset"] = {"profile": "large", "model": "social", "counts": {"a": 6_000_000, "b": 4_100_000}}
    run.manifest = lambda: manifest  # type: ignore[method-assign]
    render(run.write(tmp_path / "run"), tmp_path / "out")
    text = (tmp_path / "out" / "fixture-appendix.md").read_text()
    section = text.split("## Against the scale load test's tiers (T1/T2)")[1].split("## Run timeline")[0]
    ours = section.split("Published:")[0]
    t1 = next(ln for ln in ours.splitlines() if ln.startswith("| T1 | postgres |"))
    assert "| 10,100,000 | 1,000 |" in t1 and t1.endswith("| PASS |")
    t2 = next(ln for ln in ours.splitlines() if ln.startswith("| T2 | postgres |"))
    assert t2.endswith("| FAIL |")  # 30 ms checks miss the 25 ms p95 SLO
    assert any(ln.startswith("| T1 | spicedb-pg |") for ln in ours.splitlines())
    assert "| T2 | 10,000,000 | 10,000 | 0.7240 | 16.3000 | 3.4900 |" in section.split("Published:")[1]
    rebac = Run().server("postgres", NET)
    rebac.phase("postgres", "mixed", steady(1.0))
    render(rebac.write(tmp_path / "r2"), tmp_path / "o2")
    assert "T1/T2" not in (tmp_path / "o2" / "fixture-appendix.md").read_text()


def test_a_load_that_timed_no_batches_shows_no_batch_figures_and_warns_nothing():
    # The SSTable path loads in one bulk call: its record has no batch times.
    import warnings

    import pandas as pd

    from authzbench.report.core.data import ingest_table

    rec = Run().ingest("scylla", 12.8).recs[0] | {"batch_seconds": []}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        row = ingest_table([rec]).iloc[0]
    assert math.isnan(row["batch_mean_s"]) and math.isnan(row["batch_p95_s"]) and pd.isna(row["batches"])


def test_visibility_lags_rest_on_an_assumed_interval_and_are_never_clearly_apart():
    # 0.069 and 0.152 ms swapped places between two back-to-back make bench runs (both visible at the first
    # check, the lag read by polling every millisecond), and so did openfga 5,005 / 5,042 against spicedb-pg
    # 4,993 / 5,308 ms: one p95 per backend, its ±1 poll assumed, carries no verdict however far apart
    spice = {**NET, "label": "SpiceDB 1.45 on PostgreSQL 15"}
    run = Run().server("postgres", NET).server("scylla", CASS).server("spicedb-pg", spice)
    for b, ms in (("postgres", 0.069), ("scylla", 0.152), ("spicedb-pg", 4985.0)):
        run.phase(b, "write_membership", steady(ms, n=60, slots=1), concurrency=1, kind="visibility",
                  writes=[1.0] * 120, extra={"stale_allows": 0, "stale_reads": 0})
    d = _dim(run.data(), "Visibility lag p95")
    assert all(f.assumed == writes_topic.LAG_BASIS for f in d.figures)
    assert _order(run.data(), "Visibility lag p95") == [["postgres", "scylla", "spicedb-pg"]]


def test_check_throughput_is_titled_by_the_worker_counts_that_ran():
    """"Best throughput over the concurrency sweep" named a sweep for scenarios run at one worker only."""
    one = two_backends(1.0, 3.0).data()
    assert any(d.title == "Throughput at 1 worker, check_manage_direct_user" for d in dimensions.compute(one))
    run = two_backends(1.0, 3.0)
    run.phase("postgres", "check_manage_direct_user", steady(1.0), concurrency=8)
    titles = [d.title for d in dimensions.compute(run.data())]
    assert "Best throughput over 1, 8 workers, check_manage_direct_user" in titles
    assert not any("sweep" in t for t in titles)


def test_two_too_few_percentiles_are_never_clearly_apart_however_far_their_values():
    from authzbench.report.core.figures import cell, clearly_better

    run = Run()
    for b, ms in (("permify", [2.0] * 5), ("scylla", [3000.0] * 5), ("postgres", [0.1] * 40)):
        run.server(b, NET).phase(b, "check_negative", [ms])
    rd = run.data()
    x = {b: cell(rd, b, "check_negative", 1, "p95_ms") for b in ("permify", "scylla", "postgres")}
    c = {b: ranking.Figure(b, v.value, n=v.n, q=95.0, bounds=(v.lo, v.hi), fewest=v.fewest)
         for b, v in x.items()}
    assert c["permify"].too_few and c["scylla"].too_few and not c["postgres"].too_few
    assert not clearly_better(c["permify"], c["scylla"], False) and not clearly_better(
        c["scylla"], c["permify"], False)
    # a measured p95 below a too-few one's low end still is
    assert clearly_better(c["postgres"], c["scylla"], False)


def test_a_short_round_marks_the_cell_as_the_sample_size_table_does():
    from authzbench.report.core.figures import cell
    from authzbench.report.validity import _sample_sizes

    run = Run().server("postgres", NET)
    run.phase("postgres", "check_negative", [[1.0] * 30], repeat=0)
    run.phase("postgres", "check_negative", [[1.0] * 12], repeat=1)  # 42 ops in all, but one round of 12
    rd = run.data()
    c = cell(rd, "postgres", "check_negative", 1, "p95_ms")
    assert c.n == 42 and c.too_few and c.hi == math.inf
    table = "\n".join(_sample_sizes(rd, lambda b: b, lambda df, cols: df.to_string()))
    assert "12" in table and "p95" in table


def test_a_mixed_verdict_resting_on_a_short_rounds_write_p95_carries_the_mark_in_the_summary_and_the_table():
    from authzbench.report.core.frames import slo_verdicts

    run = Run().server("postgres", NET)
    for rnd, writes in enumerate(([2.0] * 30, [2.0] * 5)):  # 35 writes, but one round of 5: a p95 needs 20
        run.phase("postgres", "mixed", steady(1.0, n=100, slots=1), repeat=rnd, writes=writes)
    rd = run.data()
    v = slo_verdicts(rd)
    assert int(v["write_ops"].iloc[0]) == 35 and int(v["write_fewest"].iloc[0]) == 5
    [fig] = _dim(rd, "Mixed workload (closed loop)").figures
    assert fig.too_few
