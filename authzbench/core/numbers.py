"""How a figure reads in prose, written once: the report's tables and sentences and the run's own reasons
(a churn step's verdict) print a value the same way, so one figure shows one value wherever it appears."""

from __future__ import annotations

import math


def num(v: float) -> str:
    """A figure in prose: 0.127, 1.16, 36.4, 1,316 (three significant digits, thousands separated)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if v == 0:
        return "0"
    if math.isinf(v):
        return "∞"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
