"""End to end on the reference backend: generate -> bench -> report, and the report's numbers
equal those recomputed from the raw records."""

from __future__ import annotations

import json
import re

import pytest

from authzbench.config import BenchConfig
from authzbench.core.metrics import merge
from authzbench.report import render
from authzbench.report.compare import render_compare
from authzbench.report.core.figures import cell
from authzbench.results.store import RunStore
from authzbench.run import orchestrate


def both(path) -> str:
    """The main report and its appendix, as one text."""
    return path.read_text() + "\n" + path.with_name(f"{path.stem}-appendix.md").read_text()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    cfg = BenchConfig.of(backends=["reference"], provision="native", profile="tiny", concurrency=[1, 2],
                         iterations_scale=0.1, data_dir=root / "data")
    store = RunStore.create(root / "results", config={"profile": "tiny"})
    failures = orchestrate.bench(cfg, store)
    assert failures == []
    return store, render(store.path, root / "reports")


def test_report_covers_every_section_and_scenario(run):
    _, path = run
    text = both(path)
    for heading in (
        "Test environment", "Dataset", "Dataset: parameters and distribution", "Write performance",
        "Read performance", "Mixed read/write", "## 5. Reads", "Correctness"):
        assert heading in text
    for scen in (
        "check_manage_direct_user", "check_manage_org_admin", "check_view_via_group_member", "check_negative",
        "lookup_resources_manage_super", "lookup_resources_view_regular", "roundtrip"):
        assert f"`{scen}`" in text
    assert (path.parent / f"{path.stem}-charts" / "check_negative.png").is_file()


def test_report_numbers_equal_those_recomputed_from_raw_records(run):
    store, path = run
    recs = [json.loads(line) for line in (store.path / "records.jsonl").read_text().splitlines()]
    pid = "reference/check_view_via_group_member/c2/r0"  # a check at more than one worker
    ivs = [r for r in recs if r["type"] == "interval" and r["phase"] == pid]
    h = merge(r["hist"] for r in ivs)
    ops = sum(r["ops"] for r in ivs)
    p95 = h.get_value_at_percentile(95) / 1000
    text = both(path)
    section = re.split(r"### `check_view_via_group_member`", text)[1]  # its own table, not the method's list
    row = next(line for line in section.splitlines() if line.startswith("| reference † | 2 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[2].replace(",", "")) == ops
    assert float(cells[5]) == pytest.approx(p95, abs=0.0005)


def test_zero_mismatches_for_the_oracle_itself(run):
    _, path = run
    assert re.search(r"mismatches: \*\*0\*\*", path.read_text())


def test_a_run_killed_midway_still_renders_what_finished(run, tmp_path):
    store, _ = run
    lines = (store.path / "records.jsonl").read_text().splitlines()
    cut = tmp_path / "killed"
    cut.mkdir()
    (cut / "manifest.json").write_text((store.path / "manifest.json").read_text())
    # Cut inside a phase (after its start, before its end) on a half-written line, as a kill would.
    start = next(i for i, line in enumerate(lines)
                 if '"phase_start"' in line and "check_view_via_group_member/c2" in line)
    (cut / "records.jsonl").write_text("\n".join(lines[: start + 2]) + '\n{"type": "interv')
    text = both(render(cut, tmp_path / "reports"))
    assert "Read performance" in text
    assert "reference/check_view_via_group_member/c2/r0`: **incomplete**" in text  # it never recorded its end
    assert "`check_manage_direct_user`" in text  # what finished before is all there


def test_compare_renders_ratios_of_two_runs(run, tmp_path):
    store, _ = run
    out = render_compare(store.path, store.path, tmp_path)
    text = out.read_text()
    assert "p50 B/A" in text and "1.000" in text


def test_social_workload_runs_open_loop_rate_steps_with_slo_verdicts(tmp_path):
    cfg = BenchConfig.of(backends=["reference"], provision="native", profile="tiny", model="social",
                         concurrency=[2], iterations_scale=0.05, rates=[50.0, 100.0], duration_s=1.0,
                         write_share=0.05, data_dir=tmp_path / "data",
                         # generous: this proves the verdict mechanism, not this machine's speed under load
                         slo={"check_p95_ms": 1000.0, "write_p95_ms": 1000.0, "success": 0.99})
    store = RunStore.create(tmp_path / "results", config={"model": "social"})
    assert orchestrate.bench(cfg, store) == []
    text = both(render(store.path, tmp_path / "reports"))
    assert "`social_view_interaction`" in text
    assert "SLO verdicts" in text and "highest open-loop rate that met the SLO: **100 ops/s**" in text
    recs = [json.loads(line) for line in (store.path / "records.jsonl").read_text().splitlines()]
    kinds = {r["kind"] for r in recs if r["type"] == "interval" and r["scenario"] == "social_mixed"}
    assert kinds == {"check", "write"}
    assert "mismatches: **0**" in text


def test_a_model_no_chosen_backend_implements_is_refused_before_anything_starts(tmp_path, monkeypatch):
    from dataclasses import replace

    from authzbench.core.errors import UserError
    from authzbench.systems import systems

    monkeypatch.setitem(systems(), "reference", replace(systems()["reference"], models=frozenset({"rebac"})))
    cfg = BenchConfig.of(backends=["reference"], provision="native", profile="tiny", model="social",
                         concurrency=[1], iterations_scale=0.05, data_dir=tmp_path / "data")
    store = RunStore.create(tmp_path / "results")
    with pytest.raises(UserError, match="does not implement the 'social' model"):
        orchestrate.bench(cfg, store)
    assert not (tmp_path / "data").exists()  # no dataset generated
    assert not list(store.records())


def test_an_ingest_variant_is_measured_by_its_own_reload_and_reported_as_its_own_row(tmp_path, monkeypatch):
    from authzbench.systems.reference.adapter import ReferenceBackend

    seen: list[str | None] = []
    original = ReferenceBackend.load

    def load(self, ds, progress=None):
        seen.append(self.options.get("ingest"))
        return original(self, ds) if progress is None else original(self, ds, progress)

    monkeypatch.setattr(ReferenceBackend, "ingest_variants", {"OtherPath": {"ingest": "other"}})
    monkeypatch.setattr(ReferenceBackend, "load", load)
    cfg = BenchConfig.of(backends=["reference"], provision="native", profile="tiny", concurrency=[1],
                         scenarios=["check_negative"], iterations_scale=0.05, data_dir=tmp_path / "data",
                         ingest_variants="all")
    store = RunStore.create(tmp_path / "results")
    assert orchestrate.bench(cfg, store) == []
    assert seen == ["other", None]  # the variant first; the default path loads last and serves the reads
    text = both(render(store.path, tmp_path / "r"))
    write_rows = [
        ln for ln in text.split("## 4.")[1].split("## 5.")[0].splitlines() if ln.startswith("| reference")]
    assert len(write_rows) == 2 and any("via OtherPath" in ln for ln in write_rows)


def test_repeats_give_a_coefficient_of_variation_recomputed_from_the_phases(tmp_path):
    import statistics

    from authzbench.report.core.data import load_run

    cfg = BenchConfig.of(
        backends=["reference"], provision="native", profile="tiny", concurrency=[1], repeat=3,
        scenarios=["check_negative"], iterations_scale=0.05, data_dir=tmp_path / "data")
    store = RunStore.create(tmp_path / "results")
    assert orchestrate.bench(cfg, store) == []
    text = both(render(store.path, tmp_path / "r"))
    section = text.split("## Stability across rounds")[1].split("## Validity")[0]
    row = next(ln for ln in section.splitlines() if ln.startswith("| reference"))
    p50s = load_run(store.path).phases.query("scenario == 'check_negative'")["p50_ms"].tolist()
    assert len(p50s) == 3 and "| 3 |" in row
    want = statistics.stdev(p50s) / statistics.mean(p50s)
    assert f"{want:.3f}" in row


def test_a_checks_ratio_to_its_round_trip_is_one_number_per_row_when_the_run_has_rounds(tmp_path):
    from authzbench.report.core.data import load_run

    cfg = BenchConfig.of(
        backends=["reference"], provision="native", profile="tiny", concurrency=[1], rounds=3,
        scenarios=["roundtrip", "check_negative"], iterations_scale=0.05, data_dir=tmp_path / "data")
    store = RunStore.create(tmp_path / "results")
    assert orchestrate.bench(cfg, store) == []
    text = both(render(store.path, tmp_path / "r"))
    assert "dtype" not in text
    section = re.search(r"### `check_negative`(.*?)###", text, re.S).group(1)
    row = next(ln for ln in section.splitlines() if ln.startswith("| reference"))
    rd = load_run(store.path)
    ratio = cell(rd, "reference", "check_negative", 1, "p50_ms").value / cell(rd, "reference", "roundtrip", 1,
                                                                               "p50_ms").value
    shown = row.strip().strip("|").split("|")[-1].strip()
    assert float(shown) == pytest.approx(ratio, rel=0.01)  # the one computed figure over the other


def test_ingest_rates_are_computed_by_the_report_from_raw_counts_and_seconds():
    """Backends name a rate as (count, seconds); the report divides, in the rate's place among the notes."""
    from authzbench.report.core.data import ingest_rates

    rec = {"relationships": 1000, "documents": 50,
           "notes": {"closure_seconds": 0.12345, "insert_seconds": 2.0,
                     "rates": {"documents_per_s": ["documents", "insert_seconds"],
                               "relationships_per_s": ["relationships", "insert_seconds"],
                               "rows_per_s": ["rows_written", "idle_seconds"]},
                     "rows_written": 7, "idle_seconds": 0.0, "method": "m"}}
    shown = ingest_rates(rec)
    assert shown == {"closure_seconds": 0.123, "insert_seconds": 2.0, "documents_per_s": 25,
                     "relationships_per_s": 500, "rows_per_s": None, "rows_written": 7, "idle_seconds": 0.0,
                     "method": "m"}
    assert list(shown)[2:5] == ["documents_per_s", "relationships_per_s", "rows_per_s"]


def test_timeline_accounts_for_each_backends_steps_and_names_the_slowest(run):
    from authzbench.core.records import PhaseEnd, PhaseStart
    from authzbench.report.timeline import per_backend, steps

    store, path = run
    recs = list(store.typed())
    df = steps(recs)
    kinds = set(df[df["backend"] == "reference"]["step"])
    assert {"start", "load", "stop"} <= kinds  # each recorded around the step as it ran
    starts = {r.phase: r.ts for r in recs if isinstance(r, PhaseStart)}
    phases = [r.ts - starts[r.phase] for r in recs if isinstance(r, PhaseEnd)]
    row = per_backend(df).set_index("backend").loc["reference"]
    assert row["n_phases"] == len(phases)
    assert row["phases"] == pytest.approx(sum(phases))  # workers' start and warm-up included
    assert row["span_s"] >= row["start"] + row["load"] + row["phases"] + row["stop"] - 1e-6
    text = both(path).split("## Run timeline")[1]
    slowest = df.nlargest(1, "seconds").iloc[0]
    assert f"1. {'reference † ' if slowest.backend else ''}{slowest.step} ({slowest.seconds:,.1f} s)" in text


def test_timeline_gives_the_measured_windows_share_of_the_wall_clock(run):
    from authzbench.core.records import PhaseEnd
    from authzbench.report.timeline import measured_windows, steps

    store, path = run
    recs = list(store.typed())
    windows = measured_windows(recs)
    assert windows["reference"] == pytest.approx(sum(r.wall_s for r in recs if isinstance(r, PhaseEnd)))
    df = steps(recs)
    wall = (df["t0"] + df["seconds"]).max() - df["t0"].min()
    text = both(path).split("## Run timeline")[1]
    assert f"{windows['reference'] / wall:.0%} of the wall clock" in text
