"""Published figures: the reference report's (reference_figures.json), which the reference and validity sections
read, and the scale load test's tiers, which the tiers and capacity sections read. A helper, so that no section
imports another."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources


@cache
def load_reference() -> dict:
    return json.loads(resources.files("authzbench.report.core").joinpath("reference_figures.json").read_text())


# SCALE-REFERENCE.md, section A, "AWS Infrastructure" and "CockroachDB Infrastructure": per tier the SpiceDB
# and CockroachDB nodes as (count, vCPUs each), the control plane (Envoy, Prometheus, ...) left out; and the
# subproblem cache hit ratio of the tier's results table.
_TIERS = """T1 10e6 1e3 3x4 4x8 .332; T2 10e6 1e4 4x8 3x16 .724; T3 1e8 1e3 6x4 3x16 .05; T4 1e8 1e4 4x8 3x16 .724;
T5 1e8 1e5 12x16 5x16 .876; T6 1e9 1e3 3x4 3x4 .216; T7 1e9 1e4 3x8 3x8 .737; T8 1e9 1e5 7x16 6x16 .893;
T9 1e9 1e6 25x32 12x32 .957; T10 1e11 1e3 3x4 6x8 0; T11 1e11 1e4 5x8 6x8 .651; T12 1e11 1e5 7x16 6x16 .892;
T13 1e11 1e6 21x32 6x32 .959"""


def _nodes(s: str) -> tuple[int, int]:
    n, v = s.split("x")
    return int(n), int(v)


INFRA = [{"test": t, "relationships": int(float(r)), "qps": int(float(q)), "spicedb": _nodes(sp), "crdb": _nodes(cr),
          "cache_hit": float(hit)}
         for t, r, q, sp, cr, hit in (x.split() for x in _TIERS.replace("\n", " ").split(";"))]
