"""`bench --shape`: the graph's shape swept at one size (authzbench/run/shape.py) and its report section."""

from __future__ import annotations

import re

import pytest

from authzbench.config import BenchConfig
from authzbench.core.errors import UserError
from authzbench.generator.profiles import resolve
from authzbench.generator.rebac import generate
from authzbench.report import render
from authzbench.report.core.data import load_run
from authzbench.run.shape import PARAMS, eta, parse_shapes, plan, run_shape
from tests.unit.test_cli import authzbench


def _cfg(tmp_path, **kw) -> BenchConfig:
    return BenchConfig.of(backends=["reference"], provision="native", concurrency=[1], iterations_scale=0.05,
                          data_dir=tmp_path / "data", **kw)


def test_all_plans_every_parameter_at_three_or_more_values_the_others_fixed(tmp_path):
    points = plan(_cfg(tmp_path, profile="baseline"), parse_shapes(["all"]))
    assert {p.param for p in points} == set(PARAMS)
    for name, (key, values) in PARAMS.items():
        mine = [p for p in points if p.param == name]
        assert len(mine) >= 3 and [p.value for p in mine] == values
        # one key each: the others as the profile
        assert all(p.overrides == {key: f"{p.value:g}"} for p in mine)


def test_a_given_parameter_keeps_the_users_other_overrides(tmp_path):
    cfg = _cfg(tmp_path, profile="tiny", overrides={"seed": "7"})
    points = plan(cfg, parse_shapes(["acl=2,4,8"]))
    assert [p.overrides for p in points] == [
        {"seed": "7", "viewer_users_per_res": v} for v in ("2", "4", "8")]


@pytest.mark.parametrize("items,message", [
    (["depth=1,2"], "3 or more distinct values"),
    (["depth=1,1,2"], "3 or more distinct values"),
    (["width=1,2,3"], "PARAM one of depth, fanout, acl"),
    (["depth"], "expects all or PARAM=V1,V2,V3"),
    (["depth=1,x,3"], "expected comma-separated numbers"),
    (["acl=0,1,2"], "values must be > 0"),
    (["depth=1,2,3", "depth=2,3,4"], "given more than once"),
    (["all", "depth=1,2,3"], "give it alone"),
])
def test_bad_shape_items_are_refused(items, message):
    with pytest.raises(UserError, match=message):
        parse_shapes(items)


def test_a_value_the_generator_refuses_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(UserError, match="group_depth must be below groups_per_org"):
        plan(_cfg(tmp_path, profile="tiny"), parse_shapes(["depth=1,3,6"]))  # tiny has 6 groups an org
    with pytest.raises(UserError, match="leave it out of --set"):
        plan(_cfg(tmp_path, profile="tiny", overrides={"group_depth": "2"}), parse_shapes(["depth=1,2,3"]))


@pytest.mark.parametrize("args,message", [
    (["--shape", "depth=1,2"], "3 or more distinct values"),
    (["--shape", "all", "--profiles", "tiny,baseline"], "leave out --profiles and --scale"),
    (["--shape", "all", "--model", "social"], "--model social has no groups"),
])
def test_bad_shape_input_is_one_line_and_exit_code_2(tmp_path, args, message):
    r = authzbench("bench", "--backend", "reference", "--profile", "tiny", *args, "--no-report", cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr.strip().splitlines()[-1] and "Traceback" not in r.stderr


@pytest.mark.parametrize("depth", [1, 3, 5])
def test_group_depth_nests_one_chain_exactly_that_deep_in_each_org(depth):
    p = resolve("tiny", {"group_depth": str(depth)})
    edges: list[tuple[int, int]] = []
    generate(p,
             lambda rel, o, s: (
                 edges.extend(zip(o.tolist(), s.tolist(), strict=True)) if rel == "group_child" else None))
    parent = {child: par for par, child in edges}
    deepest = max(_depth(parent, g) for g in parent)
    assert deepest == depth and len(edges) == depth * p.orgs


def _depth(parent: dict[int, int], g: int) -> int:
    n = 0
    while g in parent:
        g, n = parent[g], n + 1
    return n


def test_the_estimate_spreads_the_mean_point_time_over_the_points_left():
    assert eta(0.0, 0, 9, 60.0) == "shape sweep: 0/9 points, 1 min elapsed"
    assert eta(0.0, 3, 9, 1800.0) == "shape sweep: 3/9 points, 30 min elapsed, ~60 min left"


@pytest.mark.slow
def test_a_shape_sweep_runs_each_point_and_the_last_report_shows_what_depends_on_it(tmp_path):
    cfg = _cfg(
        tmp_path, profile="tiny", scenarios=["check_view_via_group_member", "lookup_resources_manage_super"])
    reports = []
    failures = run_shape(cfg, plan(cfg, parse_shapes(["depth=1,2,4"])), tmp_path / "results",
                         lambda run: reports.append(render(run, tmp_path / "r")) or reports[-1])
    assert failures == [] and len(reports) == 3
    last = reports[-1].read_text()
    assert "How cost grows with the graph's shape" not in reports[0].read_text()  # one value: nothing to fit
    # marked as every report marks it
    assert "### depth: groups nested" in last and "| reference † | 4 |" in last
    assert "depth^" in last and "(95%:" in last  # three values: an exponent with its interval
    assert re.search(
        r"^- depth=4: [\d,]+ relationships, run `[\d-]+`, [\d,]+ answers, 0 mismatches$", last, re.M)
    assert "Wrong answers" not in last
    assert list((tmp_path / "r").glob("*-charts/shape-depth-check_p95_ms.png"))
    hashes = {load_run(r).manifest["dataset"]["hash"] for r in sorted((tmp_path / "results").iterdir())}
    assert len(hashes) == 3  # every point its own dataset
