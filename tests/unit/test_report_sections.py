"""The report is topics over a small core (docs/ARCHITECTURE.md, "The report pipeline"). The core
(report/core/) reads the records and holds what every topic shares; a topic (reads, writes, churn, ...)
owns its frame, figures, lines, tables and chart and imports only the core (a package topic, such as sweep/,
its own modules too; a topic's chart module, <topic>_chart, is the topic's own); an assembler puts topics
together into a document (document.py, compare.py, loadtest.py) or a summary across topics (the decision
summary, the Findings and their dimensions). Every import statement of a report module, top-level or inside
a function, read with ast, is an edge."""

from __future__ import annotations

import ast
from pathlib import Path

import authzbench.report

REPORT = Path(authzbench.report.__file__).parent

TOPICS = frozenset({
    "capacity", "churn", "features", "freshness", "hosts", "ingest", "load_tiers", "mixed", "outcomes",
    "overview", "reads", "reference", "timeline", "validity", "writes",
    "churn_chart", "freshness_chart", "mixed_chart", "reads_chart", "writes_chart",
    "sweep", "sweep.growth", "sweep.projected", "sweep.runs", "sweep.scaling", "sweep.shapes", "sweep.chart"})
# document, compare, loadtest: documents; decision (and its heatmap, decision_chart), findings, dimensions,
# workloads, digest: what reads across the topics (the decision summary and its workload rows, the Findings,
# the list of dimensions, the figure table and JSON beside the main report's per-topic digests)
ASSEMBLERS = frozenset({
    "__init__", "document", "compare", "loadtest", "decision", "decision_chart", "findings", "dimensions",
    "workloads", "digest"})


def module_name(path: Path, root: Path = REPORT) -> str:
    """"reads", "core.noise", "sweep" (a package's __init__), "__init__" (the report's own)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1]) if parts[-1] == "__init__" and len(parts) > 1 else ".".join(parts)


def report_imports(path: Path, root: Path = REPORT) -> set[str]:
    """The report modules `path` imports, by module_name: `from authzbench.report import x`, `from
    authzbench.report.core.x import ...`, `import authzbench.report.x`, wherever the statement stands."""
    def known(dotted: str) -> str | None:
        rel = dotted.removeprefix("authzbench.report").lstrip(".")
        if not rel:
            return None
        p = root / rel.replace(".", "/")
        return rel if p.with_suffix(".py").exists() or (p / "__init__.py").exists() else None

    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("authzbench.report"):
            subs = {known(f"{node.module}.{a.name}") for a in node.names} - {None}
            out |= subs or {known(node.module)} - {None}
        elif isinstance(node, ast.Import):
            out |= {m for a in node.names if (m := known(a.name))}
    return out


def _modules() -> set[str]:
    return {module_name(p) for p in REPORT.rglob("*.py")}


def _edges() -> set[tuple[str, str]]:
    return {(module_name(p), m) for p in REPORT.rglob("*.py") for m in report_imports(p)} - \
        {(m, m) for m in _modules()}


def _core(m: str) -> bool:
    return m == "core" or m.startswith("core.")


def _package(m: str) -> str:
    """The topic a module belongs to: "sweep" for sweep.runs, "reads" for reads_chart (the topic's chart)."""
    return m.split(".")[0].removesuffix("_chart")


def test_every_report_module_is_core_a_topic_or_an_assembler():
    unclassed = {m for m in _modules() if not _core(m) and m not in TOPICS | ASSEMBLERS}
    assert unclassed == set(), "class the new module (or drop the gone one) in this test"
    assert _modules() >= TOPICS | ASSEMBLERS, "a module this test classes is gone"
    assert not TOPICS & ASSEMBLERS, "a module is in two classes"


def test_the_core_imports_only_the_core():
    assert {(a, b) for a, b in _edges() if _core(a) and not _core(b)} == set()


def test_a_topic_imports_only_the_core_and_its_own_package():
    found = {(a, b) for a, b in _edges() if a in TOPICS and not _core(b) and _package(b) != _package(a)}
    assert found == set(), "move what two topics share into report/core/"


def test_document_lists_topics_and_summaries_only():
    listed = report_imports(REPORT / "document.py")
    assert {m for m in listed if not _core(m)} <= TOPICS | ASSEMBLERS
    assert {"reads", "writes", "churn", "freshness", "sweep.scaling"} <= listed


def test_the_import_walk_sees_a_lazy_import_inside_a_function_and_a_core_module(tmp_path: Path):
    p = tmp_path / "x.py"
    p.write_text(
        "def f():\n    from authzbench.report.decision import ranked\n    import authzbench.report.churn\n"
        "    from authzbench.report.core import noise\n    from authzbench.report.sweep import runs\n")
    assert report_imports(p) == {"decision", "churn", "core.noise", "sweep.runs"}


def test_a_topics_chart_module_belongs_to_its_topic_and_to_no_other():
    assert _package("reads_chart") == "reads" and _package("sweep.chart") == "sweep"
    assert _package("writes") != _package("reads_chart")
