"""The appendix's features table: each measured backend's declared claims, marked declared, a ✓ only where a
test against the real server exercises the claim, and the hand-built models' 'no' beside the engines'
'yes'."""

from __future__ import annotations

from pathlib import Path

from authzbench.report import features
from authzbench.report.core.data import load_run
from authzbench.systems import systems

RUN = Path(__file__).resolve().parents[2] / "reports" / "data" / "20261202-052519"


def test_the_features_table_has_a_row_per_measured_backend_with_its_declared_claims(tmp_path):
    rd = load_run(RUN)
    text = features.section(rd, tmp_path)
    assert "(declared, not measured)" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| Backend")]
    assert len(rows) == sum(1 for b in rd.servers if systems()[b].claims)
    spice = next(r for r in rows if r.startswith("| spicedb-pg"))
    assert spice.split(" | ")[1] == "yes ✓"  # its token claim names the test that exercises it
    pg = next(r for r in rows if r.startswith("| postgres"))
    assert set(pg.strip("| ").split(" | ")[1:]) == {"no"}
