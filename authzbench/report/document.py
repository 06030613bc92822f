"""The report: a main document a design review reads (the decision summary first, under 400 lines) and an
appendix beside it with every table, each a section function `(rd, out_dir) -> markdown` of the run's frames
(drawing its own charts into out_dir/<run-id>-charts/), plus the ranked figures as JSON."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from authzbench.report import (
    capacity,
    churn,
    decision,
    digest,
    features,
    findings,
    freshness,
    hosts,
    ingest,
    load_tiers,
    mixed,
    outcomes,
    overview,
    reads,
    reference,
    timeline,
    validity,
    writes,
)
from authzbench.report.core.data import RunData, load_run
from authzbench.report.core.fold import fold
from authzbench.report.sweep import scaling, shapes

Section = Callable[[RunData, Path], str]


def appendix_link(rd: RunData, out_dir: Path) -> str:
    run_id = rd.manifest["run_id"]
    return (f"## Appendix\n\n[`{run_id}-appendix.md`]({run_id}-appendix.md): every phase's table, monitors, "
            "structural writes in every mode, stability, validity and limitations, the reference report "
            "side by side, the run timeline and every ranked figure with its interval. "
            f"[`{run_id}.json`]({run_id}.json): the ranked figures, machine-readable.\n")


MAIN: list[Section] = [
    overview.intro, decision.section, findings.section, overview.environment, overview.dataset,
    overview.method,
    ingest.section, reads.digest, mixed.digest, writes.digest, outcomes.correctness_digest,
    scaling.section,  # "" unless the run is part of a `--profiles` size sweep
    shapes.section,  # "" unless the run ends a `--shape` sweep
    capacity.section,  # "" unless the run names --target-qps and --target-relationships
    outcomes.problems, appendix_link]
APPENDIX: list[Section] = [
    reads.section, ingest.monitor, mixed.section, writes.section, churn.section,
    freshness.section, features.section, hosts.section, overview.distribution,
    outcomes.correctness, outcomes.stability, validity.section]
AFTER_REFERENCE: list[Section] = [load_tiers.section, timeline.section, digest.figure_table]


def render(run_path: Path, out_dir: Path, against_reference: bool | None = None) -> Path:
    """against_reference None: on for the rebac baseline (reference.default_on). Writes <run-id>.md, its
    appendix <run-id>-appendix.md and the ranked figures <run-id>.json; returns the main document's path."""
    rd = load_run(run_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    run_id = rd.manifest["run_id"]
    with_reference = reference.default_on(rd) if against_reference is None else against_reference
    appendix = [*APPENDIX, *([reference.section] if with_reference else []), *AFTER_REFERENCE]
    _write(out_dir / f"{run_id}-appendix.md", f"# authzbench report — run `{run_id}`: appendix\n\n"
           f"The main report: [`{run_id}.md`]({run_id}.md).\n", rd, out_dir, appendix, numbered=False)
    digest.write_json(rd, out_dir / f"{run_id}.json")
    return _write(out_dir / f"{run_id}.md", f"# authzbench report — run `{run_id}`\n", rd, out_dir, MAIN)


def _write(path: Path, head: str, rd: RunData, out_dir: Path, sections: list[Section],
           numbered: bool = True) -> Path:
    md = "\n".join(x for x in [head, *(s(rd, out_dir) for s in sections)] if x)
    # the appendix's sections keep their titles, not the main report's section numbers; the main report
    # and the appendix keep every line readable (fold.MAX_LINE): 7 appendix lines of prose ran 404-1,071
    # characters; no appendix table row is over the limit, so its tables print as they were
    path.write_text(fold(md if numbered else re.sub(r"(?m)^(#{2,4}) \d+(?:\.\d+)*\.? ", r"\1 ", md)))
    return path
