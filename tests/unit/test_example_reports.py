"""The example reports under reports/ re-render from the results committed beside them (issue 46)."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from authzbench.core.records import Loadtest, Oracle
from authzbench.measure.k6 import run_plan
from authzbench.report import digest
from authzbench.report.core.data import load_run
from authzbench.report.core.tables import JSON_DIGITS, significant
from authzbench.report.dimensions import compute
from authzbench.report.loadtest import render_run as render_loadtest
from authzbench.results.store import RunStore
from authzbench.tools import examples as examples_module
from authzbench.tools.examples import REPORTS, Example, add, examples, render
from authzbench.workloads.loadtest import LoadTestPlan

EXAMPLES = examples()


def _companions(ex: Example) -> list[str]:
    """The files a render writes beside the main report and the test compares too (charts are not
    compared)."""
    stem = ex.report.removesuffix(".md")
    return [ex.report] + ([] if _quick(ex) else [f"{stem}-appendix.md", f"{stem}.json"])


def _quick(ex: Example) -> bool:
    """A comparison, a cross-check or a load test: one markdown file, seconds to render; a bench report draws
    its charts from ~7 MB of records, a minute or two on 2 shared cores."""
    return ex.report.startswith(("compare-", "crosscheck-", "loadtest-"))


def test_a_run_whose_records_are_gzipped_reads_like_the_plain_one(tmp_path):
    recs = [{"type": "oracle", "seconds": 0.5, "ts": 1.0},
            {"type": "step", "backend": None, "step": "builds before measuring", "t0": 1.0, "seconds": 1.0,
             "ts": 2.0}]
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    for d in (plain, packed):
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps({"run_id": d.name}))
    (plain / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with gzip.open(packed / "records.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    assert list(RunStore.open(packed).records()) == list(RunStore.open(plain).records()) == recs


class _Engine:
    """A load test's engine that answers every check "allowed" at once."""

    def check(self, user: int, perm: str, obj: int) -> bool:
        return True

    def close(self) -> None:
        pass


def _loadtest_run(results: Path) -> Path:
    """A load test's results as `authzbench loadtest` leaves them: one `loadtest` record an engine and
    variant, the context lines in the manifest."""
    store = RunStore.create(results, run_id="20990101-000000", config={"via": "loadtest", "profile": "tiny"})
    plan = LoadTestPlan("t", start_rate=40.0, stages=((40.0, 0.5),), threads=2, max_vus=5, think_s=0.0)
    res = run_plan(plan, _Engine, [(1, 2, True)])
    store.append(Loadtest(backend="fake", label="Fake 1.0", variant="corrected", plan=asdict(plan),
                          dataset_hash="0" * 16, **res.record()))
    store.update_manifest(loadtest_context=["Dataset: a fake one."])
    return store.path


def test_a_load_tests_example_re_renders_to_the_report_the_command_wrote(tmp_path):
    run = _loadtest_run(tmp_path / "results")
    written = render_loadtest(run, tmp_path / "command").read_text()
    reports = tmp_path / "reports"
    path = add(run, reports)
    assert path == reports / "loadtest-20990101-000000.md" and path.read_text() == written
    assert "Dataset: a fake one." in written and "| Fake 1.0 | corrected |" in written
    (reports / "README.md").write_text(
        f"| [`{path.stem}`]({path.name}) | [`data/{run.name}`](data/{run.name}) | a load test |\n")
    [example] = examples(reports)
    assert render(example, tmp_path / "again", reports).read_text() == written


def test_adding_a_size_sweeps_last_run_commits_every_run_of_the_sweep(tmp_path, monkeypatch):
    first, last = (RunStore.create(tmp_path / "results", run_id=n) for n in ("a", "b"))
    for store in (first, last):
        store.append(Oracle(seconds=1.0))
    last.update_manifest(sweep={"profiles": ["tiny", "baseline"], "runs": ["a", "b"]})
    rendered: list[Example] = []
    monkeypatch.setattr(
        examples_module, "render", lambda ex, out, reports: rendered.append(ex) or out / ex.report)
    add(last.path, tmp_path / "reports")
    assert rendered == [Example("b.md", ("data/b", "data/a"))]  # the last run first: the one rendered
    for store in (first, last):
        assert list(RunStore.open(tmp_path / "reports" / "data" / store.run_id).records()) == list(
            store.records())


def test_adding_a_shape_sweeps_last_run_commits_every_point_of_the_sweep(tmp_path, monkeypatch):
    stores = [RunStore.create(tmp_path / "results", run_id=n) for n in ("a", "b", "c")]
    for store in stores:
        store.append(Oracle(seconds=1.0))
    stores[-1].update_manifest(
        shape_sweep={
            "plan": [],
            "points": [{"run": n, "param": "depth", "value": v} for n, v in (("a", 1), ("b", 2), ("c", 4))]})
    rendered: list[Example] = []
    monkeypatch.setattr(
        examples_module, "render", lambda ex, out, reports: rendered.append(ex) or out / ex.report)
    add(stores[-1].path, tmp_path / "reports")
    assert rendered == [Example("c.md", ("data/c", "data/a", "data/b"))]
    for store in stores:
        assert list(RunStore.open(tmp_path / "reports" / "data" / store.run_id).records()) == list(
            store.records())


def test_reports_holds_at_most_ten_examples_each_with_its_committed_results():
    assert 1 <= len(EXAMPLES) <= 10
    listed = {"README.md", "data"}
    for ex in EXAMPLES:
        assert ex.runs, f"{ex.report}: the index names no results"
        for run in ex.runs:
            assert (REPORTS / run / "manifest.json").is_file() and (
                REPORTS / run / "records.jsonl.gz").is_file(), run
        assert (REPORTS / ex.report).is_file(), ex.report
        listed |= {*_companions(ex), ex.report.removesuffix(".md") + "-charts"}
    # Nothing else committed in reports/: a report not in the index (a lab notebook growing back) fails here.
    # Committed, not on disk: `make bench` writes its report into reports/ of the checkout it runs in.
    committed = _committed(REPORTS)
    used = {f"data/{run.split('/', 1)[1]}" for ex in EXAMPLES for run in ex.runs}
    assert sorted(committed - listed - used - {"data"}) == []


def _committed(folder: Path) -> set[str]:
    """The entries of folder that git tracks, to two levels (data/<run-id>); every entry where git is
    absent."""
    try:
        out = subprocess.run(["git", "ls-files", "."], cwd=folder, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return {p.name for p in folder.iterdir()} | {f"data/{p.name}" for p in (folder / "data").iterdir()}
    parts = [line.split("/") for line in out.stdout.splitlines()]
    return {p[0] for p in parts} | {"/".join(p[:2]) for p in parts if p[0] == "data"}


def _slow_if_a_bench(ex: Example):
    return pytest.param(ex, id=ex.report, marks=[] if _quick(ex) else [pytest.mark.slow])


@pytest.mark.parametrize("example", [_slow_if_a_bench(ex) for ex in EXAMPLES])
def test_every_example_re_renders_from_its_committed_results_to_the_committed_report(example, tmp_path):
    path = render(example, tmp_path)
    assert path.name == example.report
    for name in _companions(example):
        ok = (_same_figures if name.endswith(".json") else str.__eq__)(
            (tmp_path / name).read_text(), (REPORTS / name).read_text())
        assert ok, (f"reports/{name} is not what its committed results render to now: "
                    f"`python -m authzbench.tools.examples render` and commit the result")


def _same_figures(a: str, b: str) -> bool:
    """Two reports' JSON alike but for a figure's last written digit: the JSON keeps JSON_DIGITS significant
    digits, and a value on a rounding boundary (a median of two rounds, 1770.495 ops/s) tips either way
    when another host's libm or SIMD sums change its last bit."""
    return _alike(json.loads(a), json.loads(b))


def _alike(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, int | float) and isinstance(b, int | float)) or isinstance(a, bool):
            return False
        step = 10.0 ** (math.floor(math.log10(max(abs(a), abs(b)))) - JSON_DIGITS + 1) if a or b else 0.0
        return abs(a - b) <= step * 1.000001
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_alike(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_alike(a[k], b[k]) for k in a)
    return a == b


def _nudged(dims: list) -> list:
    """Every figure's value, spread and bounds one float step up: what another host's libm or SIMD path
    gives (an AMD EPYC wrote a growth exponent ...94580155054 where Intel hosts wrote ...94580155053)."""
    def up(v: float) -> float:  # zero stays zero: no host computes a denormal from a zero
        return float(np.nextafter(v, np.inf)) if v else v

    for d in dims:
        for f in d.figures:
            f.value, f.spread = up(f.value), up(f.spread)
            f.bounds = None if f.bounds is None else (up(f.bounds[0]), up(f.bounds[1]))
    return dims


@pytest.mark.slow
@pytest.mark.parametrize("example", [pytest.param(ex, id=ex.report) for ex in EXAMPLES if not _quick(ex)])
def test_an_examples_json_is_the_same_when_every_figure_differs_in_its_last_bit(
    example, tmp_path, monkeypatch):
    monkeypatch.setattr(digest, "compute", lambda rd: _nudged(compute(rd)))
    out = tmp_path / example.report.replace(".md", ".json")
    digest.write_json(load_run(REPORTS / example.runs[0]), out)
    assert _same_figures(out.read_text(), (REPORTS / out.name).read_text())


def test_two_jsons_differing_by_more_than_a_last_digit_or_in_text_are_not_alike():
    one = json.dumps({"figures": [{"value": 1770.49, "interval": [1.5, 2.0], "text": None}]})
    assert _same_figures(one, one.replace("1770.49", "1770.5"))  # a rounding boundary tipped
    assert not _same_figures(one, one.replace("1770.49", "1770.51"))
    assert not _same_figures(one, one.replace("2.0]", "2.00003]"))  # three steps of the sixth digit
    assert not _same_figures(one, one.replace("null", '"none met the SLO"'))


def test_a_json_figure_keeps_six_significant_digits_and_no_host_bits():
    assert significant(0.2857394580155054) == significant(0.2857394580155053) == 0.285739
    assert significant(12345.678) == 12345.7 and significant(-0.000123456789) == -0.000123457
    assert significant(0.0) == 0.0 and significant(None) is None and math.isinf(significant(math.inf))


def test_adding_a_cross_checks_run_renders_it_as_a_cross_check(tmp_path, monkeypatch):
    # where `authzbench crosscheck` writes
    run = RunStore.create(tmp_path / "results" / "crosscheck", run_id="c")
    run.append(Oracle(seconds=1.0))
    rendered: list[Example] = []
    monkeypatch.setattr(
        examples_module, "render", lambda ex, out, reports: rendered.append(ex) or out / ex.report)
    add(run.path, tmp_path / "reports")
    assert rendered == [Example("crosscheck-c.md", ("data/c",))]
