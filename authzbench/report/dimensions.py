"""The Findings' dimensions, in the order the report ranks them: each topic owns the functions that make its
headline figures (core/ranking.py holds the model they make and the rules that rank them); this list puts
them together, as document.py puts the topics' sections together. A new dimension is one function in its
topic and one entry here."""

from __future__ import annotations

from authzbench.report import freshness, ingest, mixed, reads, writes
from authzbench.report.core import ranking
from authzbench.report.core.data import RunData, derived
from authzbench.report.core.ranking import Dimension, DimensionFn
from authzbench.report.sweep import runs as sweep

DIMENSIONS: list[DimensionFn] = [
    ingest.ingest, writes.structural_writes, writes.visibility_lag, freshness.stale_dimensions,
    reads.check_latency, reads.check_throughput, reads.lookup_latency, mixed.mixed_closed, mixed.open_loop,
    ingest.footprint, reads.server_memory, reads.cpu_per_1k, sweep.size_growth]


def compute(rd: RunData, dims: list[DimensionFn] | None = None) -> list[Dimension]:
    """The run's dimensions (`dims`: these only); the whole ranking is computed once per run: the decision
    summary, the figure table and the Findings each ask for it."""
    if not dims:
        return list(derived(rd, "ranking", lambda: ranking.compute(rd, DIMENSIONS)))
    return ranking.compute(rd, dims)
