"""The vectorized histogram summary equals hdrh's own loops (mean, percentiles) on random latencies."""

from __future__ import annotations

import numpy as np
import pytest

from authzbench.core.metrics import new_histogram, percentile, summarize


@pytest.mark.parametrize("seed", range(5))
def test_the_summary_equals_hdrh_s_own_mean_and_percentiles(seed):
    rng = np.random.default_rng(seed)
    h = new_histogram()
    for v in rng.lognormal(6, 2, int(rng.integers(1, 5000))):
        h.record_value(max(1, int(v)))
    s = summarize(h)
    assert s.mean_ms == pytest.approx(h.get_mean_value() / 1000, rel=1e-12)
    for q, got in ((50, s.p50_ms), (95, s.p95_ms), (99, s.p99_ms)):
        assert got == h.get_value_at_percentile(q) / 1000
    for q in (0, 0.1, 33.3, 99.9, 100):
        assert percentile(h, q) == h.get_value_at_percentile(q)
