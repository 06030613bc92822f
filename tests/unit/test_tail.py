"""The tail (issue 70): a check's p99 and p99.9 beside its p50 and p95, each under the one ⚠ rule (a round
under 100 or 1,000 checks), and the longest single op with its time in the run, so a stall that no p95 shows
is named with when it happened. An old run, which recorded no such time, says so."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from authzbench.core.records import Interval, Record, as_dict
from authzbench.generator import generate
from authzbench.measure.runner import BackendFactory, PhaseSpec, run_phase
from authzbench.measure.timing import OpCounters, Timed
from authzbench.report import digest, reads
from authzbench.report.core.data import RunData, from_records
from authzbench.report.core.figures import cell
from authzbench.report.core.frames import longest_checks
from authzbench.truth.oracle import Oracle
from authzbench.workloads.catalog import SCENARIOS

SCENARIO = "check_view_via_group_member"
STALL_S = 0.05


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    ds = generate("tiny", tmp_path_factory.mktemp("d") / "tiny")
    return ds, Oracle(ds)


def _records(ds, oracle, backend: str, cls: str, rounds: int, ops: int, **opts) -> list[Record]:
    """`rounds` phases of `ops` checks each on one thread, stamped as the results store stamps them."""
    inputs = SCENARIOS[SCENARIO].sampler(ds, oracle, 200)
    factory = BackendFactory(cls, {}, {"dataset_path": str(ds.path), **opts})
    recs: list[Record] = []
    for r in range(rounds):
        spec = PhaseSpec(backend, SCENARIO, concurrency=1, iterations=ops, repeat=r, max_seconds=30)
        res = run_phase(spec, factory, inputs, lambda x: recs.append(replace(x, ts=time.time())), "thread")
        assert res.status == "complete", res.reason
    return recs


def _run(tmp: Path, recs: list[Record]) -> RunData:
    return from_records(tmp, {"run_id": "tail"}, recs)


@pytest.fixture(scope="module")
def stalled(tiny, tmp_path_factory):
    """One round of 5,000 checks on a fake whose every 500th check stalls 50 ms: 10 stalls, 0.2% of ops."""
    ds, o = tiny
    recs = _records(ds, o, "stalling", "tests.unit.fakes:StallingBackend", 1, 5000, stall_s=STALL_S)
    return recs, _run(tmp_path_factory.mktemp("r"), recs)


def test_a_stall_every_500th_check_shows_in_the_p999_and_the_longest_op_not_in_the_p95(stalled):
    _, rd = stalled
    p95, p99, p999 = (cell(rd, "stalling", SCENARIO, 1, m) for m in ("p95_ms", "p99_ms", "p999_ms"))
    assert p95 is not None and p99 is not None and p999 is not None
    # 10 of 5,000 ops stalled: the p99.9 (the 4,995th) is one of them, the p95 and the p99 are not
    assert p95.value < STALL_S * 1000 / 5 and p99.value < STALL_S * 1000 / 5
    assert p999.value >= STALL_S * 1000 and not p999.too_few
    (row,) = longest_checks(rd).itertuples()
    assert row.longest_ms >= STALL_S * 1000
    # the table's Max is the longest op as timed, beside its time in the run
    assert reads.longest_table(rd)[-1].count(" at ") == 1


def test_the_longest_ops_time_lies_within_its_phase_in_the_run(stalled):
    recs, rd = stalled
    (row,) = longest_checks(rd).itertuples()
    start = min(r.ts for r in recs)
    ph = rd.phases.iloc[0]
    begun = next(r.ts for r in recs if type(r).__name__ == "PhaseStart") - start
    ended = next(r.ts for r in recs if type(r).__name__ == "PhaseEnd") - start
    assert 0 <= row.longest_phase_s <= ph["wall_s"]
    assert begun <= row.longest_run_s <= ended


def test_the_longest_op_is_the_one_timed_longest_with_its_start_from_the_origin():
    c = OpCounters()
    origin = 10_000_000_000
    for start_ms, took_ms in ((100, 1), (2_500, 50), (4_000, 2)):
        start = origin + start_ms * 1_000_000
        c.add(None, Timed(True, None, start, start + took_ms * 1_000_000))
    p = c.payload(origin)
    assert p["longest_us"] == 50_000 and p["longest_at_s"] == pytest.approx(2.5)
    assert Interval(phase="p", backend="b", scenario="s", worker=0, kind="check", **p).longest_us == 50_000
    # a payload with no origin to count from (a write phase's recorder) records neither
    assert c.payload()["longest_us"] is None and c.payload()["longest_at_s"] is None


def test_a_p999_from_rounds_under_1000_checks_is_marked_and_a_p99_from_rounds_over_100_is_not(tiny, tmp_path):
    ds, o = tiny
    recs = _records(ds, o, "reference", "authzbench.systems.reference.adapter:ReferenceBackend", 2, 600)
    rd = _run(tmp_path, recs)
    p99, p999 = (cell(rd, "reference", SCENARIO, 1, m) for m in ("p99_ms", "p999_ms"))
    assert p99 is not None and not p99.too_few
    assert p999 is not None and p999.too_few
    text = reads._comparison_cell(rd, "reference", SCENARIO)
    assert text.split(";")[0].split(" / ")[3].startswith("⚠ ") and "⚠" not in text.split(" / ")[2]


def test_a_run_that_recorded_no_longest_op_says_not_recorded_and_its_json_has_none(stalled, tmp_path):
    recs, _ = stalled
    old = [replace(r, longest_us=None, longest_at_s=None) if isinstance(r, Interval) else r for r in recs]
    old_run = _run(tmp_path, [as_dict(r) for r in old])
    assert longest_checks(old_run).empty
    assert "not recorded" in reads.longest_table(old_run)[0]
    digest.write_json(old_run, tmp_path / "old.json")
    assert "longest_checks" not in json.loads((tmp_path / "old.json").read_text())


def test_the_json_carries_each_checks_p99_p999_and_longest_check_with_its_time(stalled, tmp_path):
    _, rd = stalled
    digest.write_json(rd, tmp_path / "run.json")
    out = json.loads((tmp_path / "run.json").read_text())
    p999 = next(f for f in out["figures"] if f["dimension"] == f"check_p999/{SCENARIO}")
    assert p999["value"] >= STALL_S * 1000 and "too_few" not in p999["flags"]
    assert any(f["dimension"] == f"check_p99/{SCENARIO}" for f in out["figures"])
    (longest,) = out["longest_checks"]
    assert longest["longest_ms"] >= STALL_S * 1000 and longest["longest_run_s"] >= longest["longest_phase_s"]


def test_the_appendix_check_table_shows_the_p999_and_when_the_longest_op_began(stalled, tmp_path):
    _, rd = stalled
    text = reads.section(rd, tmp_path)
    head = next(ln for ln in text.splitlines() if ln.startswith("| Backend"))
    row = next(ln for ln in text.splitlines() if ln.startswith("| stalling"))
    cells = dict(zip(head.strip("|").split(" | "), row.strip("|").split(" | "), strict=True))
    assert float(cells["p99.9 (ms)"]) >= STALL_S * 1000 > float(cells["p95 (ms)"])
    (longest,) = longest_checks(rd).itertuples()
    assert float(cells["Max (ms)"]) == pytest.approx(longest.longest_ms, abs=0.001)
    assert float(cells["Max at (s into the run)"]) == pytest.approx(longest.longest_run_s, abs=0.05)
