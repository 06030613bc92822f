"""Report rendering: run files -> markdown + PNG charts (a pure function of the results directory)."""

from authzbench.report.markdown import render

__all__ = ["render"]
