"""Report rendering: run files -> markdown + PNG charts (a pure function of the results directory).

One direction: data.py reads the results into frames; tables.py, frames.py and charts.py are shared below the
sections; each section module turns frames into its markdown (and charts); document.py puts them in order."""

from authzbench.report.document import render

__all__ = ["render"]
