"""The sweeps' charts (sweep/scaling.py, sweep/shapes.py): log-log per measure, against relationships or
one shape parameter, through report/core/charts.py's log-log helper."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from authzbench.report.core.charts import _loglog
from authzbench.report.core.data import RunData


def size_sweep(rd: RunData, df: pd.DataFrame, measures: dict[str, str], chart_dir: Path) -> dict[str, str]:
    """The size sweep's log-log chart per measure (scaling.py): one line per backend in its fixed colour and
    marker, † dashed and hollow. measure -> chart path, for the measures some backend has a value of."""
    return _loglog(rd, df, ("relationships", "relationships", "size"), measures, chart_dir, "scaling-")


def shape_sweep(rd: RunData, df: pd.DataFrame, param: str, measures: dict[str, str],
                chart_dir: Path) -> dict[str, str]:
    """The shape sweep's log-log chart per measure against one parameter's values (report/shapes.py), drawn as
    size_sweep draws against relationships. measure -> chart path."""
    return _loglog(rd, df, ("value", param, param), measures, chart_dir, f"shape-{param}-")
