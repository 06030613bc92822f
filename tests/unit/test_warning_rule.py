"""The one rule for ⚠ and unstable on small fake figures (issue 67): a percentile from a round under its op
floor is marked wherever a table prints it, its interval opens on its worse side so two such figures are never
ranked apart, and a figure whose rounds spread wider than its value is unstable, CPU per 1,000 checks as a
latency."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from authzbench.report import reads, writes
from authzbench.report.core.figures import letters
from authzbench.report.core.noise import spread_unstable
from authzbench.report.core.ranking import Figure
from authzbench.report.core.tables import mark_write_percentiles


def _p95(backend: str, value: float, fewest: int) -> Figure:
    return Figure(backend, value, q=95.0, n=fewest, fewest=fewest, bounds=(value * 0.9, value * 1.1))


def test_a_latency_from_too_few_ops_has_an_interval_open_above():
    assert _p95("a", 10.0, 2).interval() == (9.0, math.inf)
    assert _p95("a", 10.0, 20).interval() == (9.0, 11.0)


def test_two_warned_latencies_far_apart_share_a_letter_while_a_measured_one_still_beats_them():
    figs = [_p95("fast", 3.0, 200), _p95("few", 2_773.0, 2), _p95("fewer", 14_631.0, 1)]
    assert letters(figs, higher_is_better=False) == {"fast": "a", "few": "b", "fewer": "b"}


def test_a_rate_resting_on_a_warned_verdict_is_open_down_to_zero_and_never_apart_from_another():
    def rate(b: str, v: float, fewest: int) -> Figure:
        return Figure(b, v, q=95.0, n=1000, fewest=fewest, bounds=(v * 0.95, v * 1.05), worse_below=True)

    figs = [rate("big", 18_601.0, 600), rate("mid", 837.0, 14), rate("low", 269.0, 9)]
    assert figs[1].interval() == (0.0, 837.0 * 1.05)
    # the measured lead stays clear; the two whose verdicts rest on too few writes are not told apart
    assert letters(figs, higher_is_better=True) == {"big": "a", "mid": "b", "low": "b"}


def test_the_worst_kinds_visibility_lag_is_warned_when_any_kind_rested_on_too_few_ops():
    kinds = pd.DataFrame({"vis_p95_ms": [0.4, 2.7, 0.9], "vis_ops": [64, 2, 64], "vis_fewest": [64, 2, 64]})
    lag = writes._lag("mongo", kinds)
    assert lag.too_few and lag.value == 2.7 and lag.interval()[1] == math.inf
    assert not writes._lag("pg", kinds.assign(vis_fewest=[64, 30, 64])).too_few


def test_write_table_cells_are_marked_by_their_kinds_smallest_round():
    df = pd.DataFrame(
        {"write_p50_ms": [14_483.0, 2.2], "write_p95_ms": [14_631.0, 5.3],
         "write_p99_ms": [14_631.0, 11.0], "vis_p50_ms": [0.76, 0.01], "vis_p95_ms": [2.7, 0.03],
         "write_fewest": [2, 64], "vis_fewest": [1, 50]})
    out = mark_write_percentiles(df)
    assert list(out.iloc[0])[:5] == ["14,483", "⚠ 14,631", "⚠ 14,631", "⚠ 0.760", "⚠ 2.700"]
    assert list(out.iloc[1])[:5] == ["2.200", "5.300", "⚠ 11.000", "0.010", "0.030"]


def test_a_figure_is_unstable_when_its_rounds_spread_wider_than_its_value():
    assert spread_unstable(np.array([1.95, 9.45]), 3.23)
    assert not spread_unstable(np.array([2.5, 3.9]), 3.23)
    assert not spread_unstable(np.array([3.0]), 3.0)  # one round: no spread to judge


def test_cpu_per_1000_checks_is_unstable_by_the_latency_rule(monkeypatch):
    t = pd.DataFrame({"backend": ["mongo", "pg"], "cpu_s_per_1k": [3.23, 0.059],
                      "cpu_rounds": [[1.95, 9.45], [0.05, 0.07]]})
    monkeypatch.setattr(reads, "resource_table", lambda rd: t)
    monkeypatch.setattr(reads, "in_process", lambda rd, b: "")
    (dim,) = reads.cpu_per_1k(None)
    assert {f.backend: f.unstable for f in dim.figures} == {"mongo": True, "pg": False}
