"""Sections import helpers, never other sections (docs/ARCHITECTURE.md, "The report"). A section renders a part
of a report (document.py lists them in MAIN/APPENDIX); a helper computes or formats what sections share; an
assembler puts sections together into a document. Every import statement of a report module, top-level or
inside a function, read with ast, is an edge."""

from __future__ import annotations

import ast
from pathlib import Path

import authzbench.report

REPORT = Path(authzbench.report.__file__).parent

SECTIONS = frozenset({
    "capacity", "churn_steps", "consistency", "decision", "digest", "findings", "hosts", "ingest", "mixed",
    "outcomes", "overview", "reads", "reference", "scaling", "shapes", "tiers", "timeline", "validity", "writes"})
# churn and freshness: the churn sweep's and the revocations' figures, which the decision summary, the digest
# and their appendix tables (churn_steps, consistency) all read; workloads: the decision summary's workload
# rows, built from them.
HELPERS = frozenset({
    "basis", "charts", "churn", "clientbound", "data", "engines", "figures", "fold", "frames", "freshness",
    "growth", "noise", "projected", "published", "ranking", "speed", "sweep", "tables", "transfer", "workloads"})
# document: the report and its appendix; compare and loadtest: documents of their own (`report --compare`, the
# load-test reproduction).
ASSEMBLERS = frozenset({"__init__", "document", "compare", "loadtest"})


def _report_imports(path: Path) -> set[str]:
    """The report modules `path` imports: `from authzbench.report import x`, `from authzbench.report.x import
    ...`, `import authzbench.report.x`, wherever the statement stands."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "authzbench.report":
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("authzbench.report."):
            out.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[2] for a in node.names if a.name.startswith("authzbench.report.")}
    return out


def _edges() -> set[tuple[str, str]]:
    return {(p.stem, m) for p in REPORT.glob("*.py") for m in _report_imports(p)}


def test_every_report_module_is_a_section_a_helper_or_an_assembler():
    modules = {p.stem for p in REPORT.glob("*.py")}
    classes = [SECTIONS, HELPERS, ASSEMBLERS]
    assert modules == set().union(*classes), "class the new module (or drop the gone one) in this test"
    assert sum(len(c) for c in classes) == len(modules), "a module is in two classes"


def test_no_section_imports_another_section_or_an_assembler():
    found = {(a, b) for a, b in _edges() if a in SECTIONS and b in SECTIONS | ASSEMBLERS and a != b}
    assert found == set(), "move the shared function into a helper module"


def test_no_helper_imports_a_section_or_an_assembler():
    assert {(a, b) for a, b in _edges() if a in HELPERS and b not in HELPERS} == set()


def test_every_section_document_lists_is_classed_as_a_section():
    listed = {m for m in _report_imports(REPORT / "document.py") if m not in HELPERS}
    assert listed <= SECTIONS


def test_the_import_walk_sees_a_lazy_import_inside_a_function(tmp_path: Path):
    p = tmp_path / "x.py"
    p.write_text("def f():\n    from authzbench.report.decision import ranked\n    import authzbench.report.churn\n")
    assert _report_imports(p) == {"decision", "churn"}
