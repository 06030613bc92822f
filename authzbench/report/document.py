"""The report document: the sections in order, each a function `(rd, out_dir) -> markdown` of the run's
frames (drawing its own charts into out_dir/<run-id>-charts/). A new section is one such function here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from authzbench.report import (
    capacity,
    findings,
    hosts,
    ingest,
    mixed,
    outcomes,
    overview,
    reads,
    reference,
    scaling,
    tiers,
    timeline,
    validity,
    writes,
)
from authzbench.report.data import RunData, load_run

Section = Callable[[RunData, Path], str]

BEFORE_REFERENCE: list[Section] = [
    overview.intro, findings.section, overview.environment, overview.dataset, overview.method, ingest.section,
    ingest.monitor, reads.section, mixed.section, writes.section, hosts.section, outcomes.comparison,
    scaling.section,  # "" unless the run is part of a `--profiles` size sweep
    capacity.section,  # "" unless the run names --target-qps and --target-relationships
    outcomes.correctness, outcomes.stability, outcomes.problems, validity.section]
AFTER_REFERENCE: list[Section] = [tiers.section, timeline.section]  # the timeline is an appendix: where the time went


def render(run_path: Path, out_dir: Path, against_reference: bool | None = None) -> Path:
    """against_reference None: on for the rebac baseline (reference.default_on)."""
    rd = load_run(run_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    with_reference = reference.default_on(rd) if against_reference is None else against_reference
    sections = [*BEFORE_REFERENCE, *([reference.section] if with_reference else []), *AFTER_REFERENCE]
    md = [f"# authzbench report — run `{rd.manifest['run_id']}`\n", *(s(rd, out_dir) for s in sections)]
    path = out_dir / f"{rd.manifest['run_id']}.md"
    path.write_text("\n".join(x for x in md if x))
    return path
