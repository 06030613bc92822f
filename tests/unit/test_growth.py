"""Growth exponents with their uncertainty (report/growth.py) and the projection checked on synthetic sweeps
(report/projected.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from authzbench.core.projection import Range, carry
from authzbench.report.sweep.growth import fit, lines
from authzbench.report.sweep.projected import at_target, check_rows, check_table

SIZES = np.array([2.5e3, 4e4, 4e5, 4e6])


def test_an_exact_power_law_recovers_its_exponent_with_a_tight_interval():
    y = 3 * SIZES ** 0.7
    f = fit(SIZES, y, y * 0.97, y * 1.03)
    assert f.k == pytest.approx(0.7) and f.high - f.low < 1e-6 and f.n == 4 and f.off == ""
    assert "± 0.00 (95%: 0.70 to 0.70, 4 points)" in f.text()


def test_noisy_points_widen_the_interval_around_the_exponent():
    rng = np.random.default_rng(7)
    exact, noisy = (fit(SIZES, 3 * SIZES ** 0.7 * np.exp(rng.normal(0, s, len(SIZES)))) for s in (0.0, 0.3))
    assert noisy.high - noisy.low > 0.1 > exact.high - exact.low
    assert noisy.low < 0.7 < noisy.high  # the interval still covers the true exponent


def test_a_kinked_series_is_flagged_as_not_a_power_law_by_the_local_slopes_test():
    y = np.where(SIZES <= 4e4, SIZES ** 0.1, 4e4 ** 0.1 * (SIZES / 4e4) ** 1.0)  # flat, then linear
    f = fit(SIZES, y, y * 0.98, y * 1.02)
    assert "not a power law (local-slopes test)" in f.off and "0.10" in f.off and "1.00" in f.off


def test_a_point_off_the_line_beyond_its_rounds_is_flagged_by_the_residuals_test():
    x = np.array([1e3, 1e4, 1e5, 1e6, 1e7])
    y = x ** 0.5
    y[2] *= 1.5  # one size 50% above the line; its rounds spread 10%; the slopes' ranges are wide
    lo, hi = y / 1.05, y * 1.05
    lo[[0, 1, 3, 4]], hi[[0, 1, 3, 4]] = y[[0, 1, 3, 4]] / 2, y[[0, 1, 3, 4]] * 2
    assert "residuals test" in fit(x, y, lo, hi).off


def test_a_series_without_rounds_is_not_tested_for_a_power_law():
    y = np.where(SIZES <= 4e4, SIZES ** 0.1, 4e4 ** 0.1 * (SIZES / 4e4) ** 1.0)
    assert fit(SIZES, y).off == ""  # one figure per size: nothing to tell a kink from noise by


def test_two_sizes_give_a_two_point_slope_without_an_interval():
    f = fit(SIZES[:2], SIZES[:2] ** 2)
    assert (f.two_point
            and f.se is None
            and f.k == pytest.approx(2)
            and "two-point slope, no interval" in f.text())
    assert fit(SIZES[:1], SIZES[:1]) is None and fit(SIZES, np.zeros(4)) is None


def test_the_projection_range_covers_the_rounds_and_the_exponents_interval():
    pts = [(1_000, Range(10.0, 9.0, 11.0)), (10_000, Range(100.0, 90.0, 110.0))]
    g = carry(pts, 0.0, 100_000)
    assert g.at.value == pytest.approx(1000) and not g.assumed
    # steepest line: 9 -> 110 over a decade (k = log10(110/9)); from 110 at 10k, one more decade
    assert g.at.high == pytest.approx(110 * (110 / 9)) and g.at.low == pytest.approx(90 * (90 / 11))
    one = carry(pts[:1], 1.0, 10_000)
    assert one.assumed and one.at.value == pytest.approx(100) and one.at.low == pytest.approx(90)


def _sweep(k: dict[str, float], sizes=(2_500, 40_000, 400_000), spread: float = 0.05) -> pd.DataFrame:
    rows = []
    for b, e in k.items():
        for n in sizes:
            v = 0.5 * (n / 1000) ** e
            rows.append(
                {"backend": b, "relationships": n, "check_p95_ms": v, "check_p95_ms_lo": v * (1 - spread),
                 "check_p95_ms_hi": v * (1 + spread), "footprint_mib": n / 5000})
    return pd.DataFrame(rows)


def test_the_largest_size_projected_from_the_smaller_ones_has_its_error_against_the_measured():
    df = _sweep({"flat": 0.0, "linear": 1.0})
    # a jump at large
    df.loc[(df["backend"] == "linear") & (df["relationships"] == 400_000), "check_p95_ms"] *= 2
    rows = {(r["backend"], r["need"]): r for r in check_rows(df)}
    assert (rows[("flat", "check p95 (ms)")]["error"] == pytest.approx(0)
            and rows[("flat", "check p95 (ms)")]["inside"])
    assert rows[("linear", "check p95 (ms)")]["error"] == pytest.approx(-0.5)
    assert not rows[("linear", "check p95 (ms)")]["inside"]
    text = "\n".join(check_table(df))
    assert rows[("flat", "footprint (MiB)")]["inside"] is None  # one exact figure per size: a point, no range
    assert "inside the projected range for 1 of 2 projections with a range; 2 more have no range" in text
    assert "largest error is -50% (linear, check p95 (ms) at 400,000)" in text


def test_each_size_from_the_third_up_is_projected_from_the_sizes_below_it():
    df = _sweep({"linear": 1.0}, sizes=(2_500, 40_000, 400_000, 4_000_000))
    rows = [(r["size"], r["from"]) for r in check_rows(df) if r["need"] == "check p95 (ms)"]
    assert rows == [(400_000, 2), (4_000_000, 3)]


def test_a_sweep_under_three_sizes_has_no_projection_check():
    assert check_table(_sweep({"a": 1.0}, sizes=(2_500, 40_000))) == []


def test_the_growth_lines_name_each_backends_fastest_measure_and_the_kinks():
    df = _sweep({"a": 0.2})
    df["check_p95_ms"] = np.where(df["relationships"] > 40_000, df["check_p95_ms"] * 30, df["check_p95_ms"])
    text = "\n".join(
        lines(df, "relationships", "size", {"check_p95_ms": "check p95", "footprint_mib": "disk"}))
    assert ("a**, check p95: not a power law" in text
            and "Fastest-growing measure with size, per backend: a: disk" in text)
    assert "Not tested for a power law (one figure per size, no rounds to judge a kink by): disk." in text


class _Run:
    def __init__(self, target: float | None, free: float) -> None:
        self.manifest = {"config": {"target_relationships": target, "slo": {"check_p95_ms": 25.0}},
                         "environment": {"disk_free_bytes": free}}


def test_the_readers_size_names_who_leaves_the_slo_and_outgrows_the_disk():
    df = _sweep({"flat": 0.0, "steep": 1.0})
    text = "\n".join(at_target(_Run(4e7, 2**30), df))  # 100x the largest; 1 GiB free
    assert "40,000,000 relationships (100x the largest measured)" in text
    steep = next(x for x in text.splitlines() if "- steep:" in x)
    flat = next(x for x in text.splitlines() if "- flat:" in x)
    assert "projected to leave the check p95 SLO (25 ms)" in steep and "SLO" not in flat
    assert "outgrow the machine's free disk (1 GiB)" in steep  # 8,000 MiB projected
    assert at_target(_Run(None, 2**30), df) == []


def test_over_three_sizes_the_projection_exponent_spans_the_fits_95_percent_interval():
    from authzbench.core.projection import exponent as rounds_only
    from authzbench.report.sweep.projected import exponent

    pts = [(1_000, Range(1.0, 1.0, 1.0)), (10_000, Range(3.0, 3.0, 3.0)), (100_000, Range(4.0, 4.0, 4.0))]
    f = fit([s for s, _ in pts], [r.value for _, r in pts])
    k = exponent(pts)
    assert rounds_only(pts).high - rounds_only(pts).low < 1e-9  # no spread over rounds: a point range alone
    assert k.low == pytest.approx(f.low) and k.high == pytest.approx(f.high) and k.low < k.value < k.high
