"""`authzbench report --compare A B`: the ratio B / A of every figure measured in both runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from authzbench.report.data import load_run
from authzbench.report.markdown import _merge_repeats, table


def render_compare(a: Path, b: Path, out_dir: Path) -> Path:
    ra, rb = load_run(a), load_run(b)
    lines = [f"# authzbench comparison — `{rb.manifest['run_id']}` vs `{ra.manifest['run_id']}`", "",
             "Ratios are B / A (B = the second run). Below 1 means B is faster for latency, and lower for "
             "throughput.", ""]
    keys = ["backend", "scenario", "kind", "concurrency"]
    if not ra.phases.empty and not rb.phases.empty:
        pa = _merge_repeats(ra.phases[ra.phases["mode"] == "closed"]).set_index(keys)
        pb = _merge_repeats(rb.phases[rb.phases["mode"] == "closed"]).set_index(keys)
        both = pa.join(pb, lsuffix="_a", rsuffix="_b", how="inner").reset_index()
        for col in ("p50_ms", "p95_ms", "p99_ms", "ops_per_s"):
            both[f"{col}_ratio"] = both[f"{col}_b"] / both[f"{col}_a"]
        lines += ["## Reads", "", table(both, {
            "backend": "Backend", "scenario": "Scenario", "kind": "Op", "concurrency": "Workers",
            "ops_a": "Ops A", "ops_b": "Ops B",
            "p50_ms_a": "p50 A (ms)", "p50_ms_b": "p50 B (ms)", "p50_ms_ratio": "p50 B/A",
            "p95_ms_ratio": "p95 B/A", "p99_ms_ratio": "p99 B/A", "ops_per_s_ratio": "ops/s B/A",
            "mismatches_b": "Mismatches B"})]
    if not ra.ingest.empty and not rb.ingest.empty:
        ing = ra.ingest.set_index(["backend", "variant"]).join(
            rb.ingest.set_index(["backend", "variant"]), lsuffix="_a", rsuffix="_b", how="inner").reset_index()
        ing["backend"] = [b + (f" via {v}" if v else "") for b, v in zip(ing["backend"], ing["variant"], strict=True)]
        ing["rate_ratio"] = ing["rels_per_s_b"] / ing["rels_per_s_a"]
        ing["build_ratio"] = ing["build_s_b"] / ing["build_s_a"].where(ing["build_s_a"] > 0)
        lines += ["## Ingest", "", table(ing, {"backend": "Backend", "rels_per_s_a": "rels/s A",
                                               "rels_per_s_b": "rels/s B", "rate_ratio": "rels/s B/A",
                                               "build_ratio": "build time B/A"})]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"compare-{ra.manifest['run_id']}-vs-{rb.manifest['run_id']}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


__all__ = ["render_compare", "pd"]
