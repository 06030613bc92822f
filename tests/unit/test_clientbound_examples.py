"""The client-bound rule on the committed cross-checks' own records (issue 67 item 9): the model it rests on
(a saturated machine's throughput is its cores over client + server CPU per op) holds row by row, and OpenFGA
over HTTP at 8 workers, whose client took up to 46-63% of the machine, is client-bound on every row."""

from __future__ import annotations

from pathlib import Path

import pytest

from authzbench.report.core.clientbound import MARK
from authzbench.tools import crosscheck_report as cr

DATA = Path(__file__).resolve().parents[2] / "reports" / "data"
RUNS = ["20261129-073812", "20261129-082307"]


def _run(run_id: str):
    if not (DATA / run_id).exists():
        pytest.skip(f"{run_id} not committed")
    return cr.read_run(DATA / run_id)


@pytest.mark.parametrize("run_id", RUNS)
def test_throughput_at_8_workers_is_the_cores_over_client_plus_server_cpu_per_op(run_id: str):
    manifest, records = _run(run_id)
    cores = manifest["environment"]["cpu_logical"]
    rows = [
        r for r in cr.rows(records) if r.concurrency == 8 and r.ours.client_cpu_ms and r.ours.server_cpu_ms]
    assert rows
    for r in rows:
        predicted = cores * 1000 / (r.ours.client_cpu_ms + r.ours.server_cpu_ms)
        assert predicted == pytest.approx(r.ours.throughput, rel=0.06), (r.backend, r.scenario, r.side)


@pytest.mark.parametrize("run_id", RUNS)
def test_openfga_over_http_at_8_workers_is_client_bound_and_no_line_says_the_gap_is_not_our_client(
    run_id: str):
    manifest, records = _run(run_id)
    cores = manifest["environment"]["cpu_logical"]
    http = [r for r in cr.rows(records) if r.backend == "openfga" and r.side == "ours" and r.concurrency == 8]
    assert http and all(cr.client_bound(r.ours, cores) for r in http)
    assert max(cr.machine(r.ours, cores)[1] for r in http) > 0.4  # 46% in 073812, 63% in 082307
    text = cr.render(manifest, records)
    assert "the gap is not our client's CPU" not in text
    assert f"| ours | {http[0].ours.client_cpu_ms:,.4f} |" in text and f"{MARK} yes |" in text
