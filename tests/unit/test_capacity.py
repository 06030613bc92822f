"""Capacity at a target: the projection's arithmetic on fixed inputs, the cost basis extracted from fixture
records (no servers), and the refusals of `authzbench plan` where a run gives no basis."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from authzbench import cli
from authzbench.core.errors import UserError
from authzbench.core.projection import BackendBasis, Range, SizePoint, Target, exponent, project
from authzbench.report import capacity
from authzbench.report.core import basis
from authzbench.report.core.data import from_records
from tests.unit.test_report_findings import NET, Run, steady


def point(size: int, check=(0.001, 0.002, 0.0015), write=(0.01, 0.02, 0.03), rss=(1e9, 1.2e9, 1.1e9),
          disk=(4e8,), run: str = "r1") -> SizePoint:
    cpu = {k: list(v) for k, v in (("check", check), ("write", write)) if v}
    return SizePoint(
        [run], size, "p", cpu, {k: [1, 8] for k in cpu}, {k: 600 for k in cpu}, 2000.0, list(rss), list(disk))


def test_a_figure_is_the_median_of_its_rounds_and_its_interval_their_range():
    assert Range.of([3.0, 1.0, 2.0, math.nan]) == Range(2.0, 1.0, 3.0)
    assert Range.of([]) is None


def test_cores_are_rate_times_the_share_weighted_cost_per_op_over_utilization():
    b = BackendBasis("x", "x", [point(1_000_000)])
    p = project(b, Target(1000, 1_000_000, write_share=0.1, utilization=0.5))
    # 1000/s x (0.9 x 0.0015 + 0.1 x 0.02) core-s = 3.35 cores busy; / 0.5 = 6.7
    assert p.demand.value == pytest.approx(3.35)
    assert p.cores == Range(pytest.approx(6.7), pytest.approx(3.8), pytest.approx(9.6))
    assert p.size_ratio == 1 and p.rate_ratio == pytest.approx(0.5)


def test_one_size_keeps_cpu_per_op_flat_and_memory_and_disk_proportional():
    b = BackendBasis("x", "x", [point(1_000_000)])
    p = project(b, Target(1000, 100_000_000, write_share=0.0))
    assert p.cpu["check"].assumed and p.cpu["check"].at == Range(0.0015, 0.001, 0.002)
    assert p.memory.at == Range(pytest.approx(1.1e11), pytest.approx(1e11), pytest.approx(1.2e11))
    assert p.disk.at.value == pytest.approx(4e10) and p.size_ratio == 100


def test_a_growth_exponent_runs_from_the_flattest_to_the_steepest_line_through_the_intervals():
    k = exponent([(1_000_000, Range(10, 8, 12)), (10_000_000, Range(100, 90, 110))])
    assert k.value == pytest.approx(1.0)
    assert k.low == pytest.approx(math.log10(90 / 12)) and k.high == pytest.approx(math.log10(110 / 8))
    assert exponent([(1_000_000, Range(10, 8, 12))]) is None


def test_two_sizes_grow_each_figure_by_its_measured_exponent():
    small = point(1_000_000, check=(0.001, 0.001, 0.001), rss=(1e9, 1e9, 1e9))
    large = point(10_000_000, check=(0.002, 0.002, 0.002), rss=(2e9, 2e9, 2e9))
    p = project(BackendBasis("x", "x", [small, large]), Target(1000, 100_000_000, write_share=0.0))
    # CPU per check doubles per 10x: at 10x the largest size it doubles again
    assert not p.cpu["check"].assumed and p.cpu["check"].at.value == pytest.approx(0.004)
    assert p.memory.at.value == pytest.approx(4e9) and p.cores.value == pytest.approx(4 / 0.6)


@pytest.mark.parametrize("target,word", [
    (Target(1000, 1e6, write_share=0.5, lookup_share=0.6), "add up"),
    (Target(1000, 1e6, utilization=0.0), "--utilization"),
    (Target(math.nan, 1e6), "--qps"),
    (Target(1000, 0.5), "--relationships"),
])
def test_bad_numbers_are_refused(target, word):
    with pytest.raises(UserError, match=word):
        target.validate()


def test_a_write_share_without_a_write_basis_is_refused_naming_what_is_missing():
    b = BackendBasis("x", "x", [point(1_000_000, write=())])
    with pytest.raises(UserError, match="no write phase"):
        project(b, Target(1000, 1e6, write_share=0.01))
    noisy = BackendBasis("x", "x", [point(1_000_000, write=(0.0, 0.01, 0.02))])
    assert "at 0 in a round: within the checks' noise" in capacity.plan_text({"x": noisy}, Target(1000, 1e6))
    assert project(b, Target(1000, 1e6, write_share=0.0)).cores.value > 0


def mixed_run() -> Run:
    """Three rounds: check phases at 50% CPU for 4 s over 800 checks (0.0025 core-s each); mixed phases at
    60% CPU for 4 s with 800 checks and 8 writes: (2.4 - 800 x 0.0025) / 8 = 0.05 core-s per write."""
    r = Run().server("postgres", NET).ingest("postgres", 2.0, footprint=40_000_000, rels=100_000)
    for rnd in range(3):
        r.phase("postgres", "check_manage_direct_user", steady(1.0), repeat=rnd, cpu=50.0)
        r.phase("postgres", "mixed", steady(1.0), repeat=rnd, cpu=60.0 + rnd, writes=[5.0] * 8)
    return r


def test_the_basis_takes_server_cpu_per_op_per_round_and_writes_net_of_their_checks():
    e = basis.extract(mixed_run().data())
    f = e["backends"]["postgres"]
    assert f["cpu_s_per_op"]["check"] == pytest.approx([0.0025] * 3)
    # round r: (4 x (0.60 + r/100) - 800 x 0.0025) / 8
    assert f["cpu_s_per_op"]["write"] == pytest.approx([0.05, 0.055, 0.06])
    assert f["disk_bytes"] == [40_000_000] and f["rss_bytes"] == [300 * 2**20] * 3
    assert e["relationships"] == 100_000 and json.loads(json.dumps(e)) == e


def test_runs_of_one_size_pool_their_rounds_and_runs_of_two_models_are_refused():
    e = basis.extract(mixed_run().data())
    b = basis.combine([e, {**e, "run_id": "second"}])["postgres"]
    assert (len(b.points) == 1
            and b.points[0].runs == ["fixture", "second"]
            and len(b.points[0].cpu["check"]) == 6)
    with pytest.raises(UserError, match="different models"):
        basis.combine([e, {**e, "model": "social"}])


def test_plan_prints_each_backend_from_a_committed_extract(tmp_path, capsys):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(basis.extract(mixed_run().data())))
    assert cli.main(["plan", "--qps", "10k", "--relationships", "1M", str(path)]) == 0
    out = capsys.readouterr().out
    # 10,000/s x (0.99 x 0.0025 + 0.01 x 0.055) / 0.6 = 50.4 cores; disk 400 B/relationship x 1M
    assert "cores     50.4 (" in out and "disk      381.5 MiB" in out and "10x the largest size" in out
    assert "Assumptions:" in out


def test_plan_without_a_write_phase_refuses_a_write_share_in_one_line(tmp_path, capsys):
    r = Run().server("postgres", NET).phase("postgres", "check_manage_direct_user", steady(1.0))
    path = tmp_path / "b.json"
    path.write_text(json.dumps(basis.extract(r.data())))
    assert cli.main(["plan", "--qps", "1000", "--relationships", "1M", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "no write phase" in lines[0]
    assert cli.main(["plan", "--qps", "1000", "--relationships", "1M", "--write-share", "0", str(path)]) == 0


def test_the_tiers_table_puts_the_published_vcpus_beside_the_projection():
    b = BackendBasis("x", "x", [point(1_000_000, check=(0.001,) * 3, write=(0.001,) * 3)])
    md = capacity.tiers_markdown({"x": b}, 0.5)
    # T1: 1,000/s x 0.001 core-s / 0.5 = 2 cores against 3 x 4 + 4 x 8 = 44 published vCPUs
    t1 = next(line for line in md.splitlines() if line.startswith("| T1 |"))
    assert "| 33.2% | 12 | 32 | 44 | 44 | 2 (2-2) | 22 (22-22) |" in t1
    assert sum(bool(re.match(r"\| T\d+ \|", line)) for line in md.splitlines()) == 13


def test_plan_from_a_results_dir_and_from_its_extract_print_the_same(tmp_path, capsys):
    run = Path(__file__).parent / "capacity_run"
    assert cli.main(["basis", str(run), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    outs = []
    for src in (run, tmp_path / "fixture.json"):
        assert (cli.main(["plan", "--qps", "2500", "--relationships", "30M", "--lookup-share", "0", str(src)])
                == 0)
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "postgres" in outs[0]


def test_against_tiers_takes_the_tiers_rates_and_sizes_not_a_target(capsys):
    run = str(Path(__file__).parent / "capacity_run")
    assert cli.main(["plan", "--against-tiers", "--qps", "1000", run]) == 2
    assert "--against-tiers" in capsys.readouterr().err
    assert cli.main(["plan", "--against-tiers", run]) == 0
    assert (
        "| T13 | 100,000,000,000 | 1,000,000 | 95.9% | 672 | 192 | 864 | 0.864 |" in capsys.readouterr().out)


def test_the_report_has_a_capacity_section_only_when_the_run_names_a_target(tmp_path):
    r = mixed_run()
    assert capacity.section(r.data(), tmp_path) == ""
    m = r.manifest()
    m["config"].update(target_qps=10_000, target_relationships=1_000_000, write_share=0.01)
    md = capacity.section(from_records(Path("fixture"), m, r.recs), tmp_path)
    assert "## Capacity at a target" in md and "| postgres | 50.4 (" in md and "Assumptions:" in md
    assert "| postgres | write | 0.055 (0.05-0.06) | 100,000 | 3 | 24 | 0.00 (assumed) |" in md


def test_a_target_rate_without_a_target_size_is_refused():
    from authzbench.config import BenchConfig

    with pytest.raises(UserError, match="go together"):
        BenchConfig.of(
            backends=["reference"], provision="native", profile="tiny", target_qps=1000.0).validate()
    BenchConfig.of(backends=["reference"], provision="native", profile="tiny", target_qps=1e6,
                   target_relationships=1e11).validate()


def test_three_sizes_fit_one_exponent_and_a_round_at_zero_leaves_it_assumed():
    pts = [
        (10**6, Range(1.0, 1.0, 1.0)), (10**7, Range(10.0, 9.0, 11.0)), (10**8, Range(100.0, 100.0, 100.0))]
    k = exponent(pts)
    assert k.value == pytest.approx(1.0) and k.low == pytest.approx(1.0) and k.high == pytest.approx(1.0)
    assert exponent([(10**6, Range(1.0, 0.0, 2.0)), (10**7, Range(2.0, 1.0, 3.0))]) is None
