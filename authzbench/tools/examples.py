"""The example reports under reports/: each re-rendered from the results committed beside it.

The index, reports/README.md, has one table row an example: the report's link, the links of its results
(reports/data/<run-id>/, manifest.json + records.jsonl.gz) and one line on what it shows. The report's name
says how it is rendered: `compare-A-vs-B.md` by `report --compare`, `crosscheck-<run-id>.md` by the
cross-check's renderer, `loadtest-<run-id>.md` by the load test's, a report whose first results hold a
decide.json by the decision report (decide/report.py), anything else by `authzbench report`.
A size or shape sweep's example lists every run of the sweep, its last run first (the one rendered, whose
sweep section reads the others beside it).

    python -m authzbench.tools.examples add results/<run-id>   # commit a run's results and render its
                                                               # report (results/crosscheck/<run-id>: a
                                                               # cross-check's)
    python -m authzbench.tools.examples render                 # re-render every example of the index
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from authzbench.results.store import MANIFEST, RECORDS

REPORTS = Path(__file__).resolve().parents[2] / "reports"
DECIDE = "decide.json"  # a decide run's results: its stages are ordinary results directories beside it
_LINK = re.compile(r"\]\(([^)]+)\)")


@dataclass(frozen=True)
class Example:
    report: str  # the main report's file name under reports/
    runs: tuple[str, ...]  # its results, relative to reports/ (data/<run-id>)


def examples(reports: Path = REPORTS) -> list[Example]:
    """The index's rows: a row whose first cell links a report and whose second cell links its results."""
    found = []
    for line in (reports / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not (first := _LINK.findall(cells[0])):
            continue
        found.append(Example(first[0], tuple(t.rstrip("/") for t in _LINK.findall(cells[1]))))
    return found


def render(example: Example, out_dir: Path, reports: Path = REPORTS) -> Path:
    """Renders an example's report from its committed results into out_dir; returns the main report's path.
    The results are named from the repository's root (`reports/data/<run-id>`, as the report prints them),
    wherever this is called from, so the same results render the same bytes."""
    out_dir = out_dir.resolve()
    with contextlib.chdir(reports.resolve().parent):
        runs = [Path(reports.name) / r for r in example.runs]
        if example.report.startswith("compare-"):
            from authzbench.report.compare import render_compare

            return render_compare(runs[0], runs[1], out_dir)
        if example.report.startswith("crosscheck-"):
            from authzbench.tools.crosscheck_report import render_run

            return render_run(runs, out_dir)
        if example.report.startswith("loadtest-"):
            from authzbench.report.loadtest import render_run as render_loadtest

            return render_loadtest(runs[0], out_dir)
        if (runs[0] / DECIDE).is_file():
            from authzbench.decide.report import render as render_decide

            return render_decide(runs[0] / DECIDE, out_dir)
        from authzbench.report import render as render_report

        return render_report(runs[0], out_dir)


def add(run: Path, reports: Path = REPORTS) -> Path:
    """Copies a run's manifest and gzipped records to reports/data/<run-id>/ (a size or shape sweep's: every
    run of the sweep, found beside it) and renders its report in reports/."""
    if (run / DECIDE).is_file():
        return _add_decide(run, reports)
    manifest = json.loads((run / MANIFEST).read_text())
    sweep = [n for n in sweep_runs(manifest) if n != run.name]
    for r in [run, *(run.parent / n for n in sweep)]:
        _copy(r, reports / "data" / r.name)
    via_loadtest = (manifest.get("config") or {}).get("via") == "loadtest"
    kind = "loadtest-" if via_loadtest else "crosscheck-" if run.parent.name == "crosscheck" else ""
    name = f"{kind}{run.name}.md"
    return render(Example(name, tuple(f"data/{n}" for n in [run.name, *sweep])), reports, reports)


def _add_decide(run: Path, reports: Path) -> Path:
    """A decide run: its decide.json, beside it every stage's results (found as decide.json names them), and
    its decision report reports/<decide-id>.md; the stages are read from reports/data/ beside it."""
    from authzbench.decide.project import results_dir

    decide = json.loads((run / DECIDE).read_text())
    dest = reports / "data" / run.name
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run / DECIDE, dest / DECIDE)
    stages = [results_dir(s, run / DECIDE) for s in decide["stages"]]
    for s in stages:
        _copy(s, reports / "data" / s.name)
    names = [run.name, *(s.name for s in stages)]
    return render(Example(f"{run.name}.md", tuple(f"data/{n}" for n in names)), reports, reports)


def sweep_runs(manifest: dict) -> list[str]:
    """The runs of the size sweep (`sweep.runs`) or shape sweep (`shape_sweep.points`) a run's manifest
    ends."""
    points = (manifest.get("shape_sweep") or {}).get("points") or []
    return (manifest.get("sweep") or {}).get("runs") or [p["run"] for p in points]


def _copy(run: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run / MANIFEST, dest / MANIFEST)
    with open(run / RECORDS, "rb") as src, gzip.GzipFile(dest / (RECORDS + ".gz"), "wb", 9, mtime=0) as gz:
        shutil.copyfileobj(src, gz)


def main(argv: list[str]) -> int:
    if argv[:1] == ["add"] and len(argv) == 2:
        path = add(Path(argv[1]))
        print(f"{path}: add its line to {REPORTS / 'README.md'}")
        return 0
    if argv == ["render"]:
        for ex in examples():
            print(render(ex, REPORTS))
        return 0
    print("\n".join(__doc__.strip().splitlines()[-2:]), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
