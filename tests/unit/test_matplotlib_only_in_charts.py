"""Every chart is drawn in a chart module of the report (issue 57, issue 68): report/core/charts.py (the
palette and the shared machinery) and each topic's chart module beside it (report/<topic>_chart.py, or
chart.py in a topic package such as sweep/). No other module of authzbench/ imports matplotlib, at its top or
inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import authzbench

ROOT = Path(authzbench.__file__).parent
CHARTS = "report/core/charts.py"


def is_chart_module(name: str) -> bool:
    """report/core/charts.py, report/<topic>_chart.py, report/<package>/chart.py: never a module outside
    report/ nor one that only has "chart" somewhere in its name."""
    parts = name.removesuffix(".py").split("/")
    return name == CHARTS or (parts[0] == "report" and len(parts) in (2, 3)
                              and (parts[-1].endswith("_chart") or parts[-1] == "chart"))


def matplotlib_importers(modules: dict[str, str]) -> list[str]:
    """`path:line` of each import of matplotlib (or a module of it) in the sources given by path."""
    found = []
    for name, source in modules.items():
        for node in ast.walk(ast.parse(source)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            if any(n == "matplotlib" or n.startswith("matplotlib.") for n in names):
                found.append(f"{name}:{node.lineno}")
    return found


def test_no_module_but_the_report_chart_modules_imports_matplotlib():
    modules = {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted(ROOT.rglob("*.py"))}
    others = {name: src for name, src in modules.items() if not is_chart_module(name)}
    assert matplotlib_importers({CHARTS: modules[CHARTS]}), (
        "charts.py no longer imports matplotlib: update this test")
    assert not matplotlib_importers(others), "draw in the topic's chart module (report/<topic>_chart.py)"


def test_a_chart_module_is_named_for_its_topic_inside_the_report_and_nothing_else_is():
    assert is_chart_module("report/reads_chart.py") and is_chart_module("report/sweep/chart.py")
    assert is_chart_module(CHARTS)
    assert not is_chart_module("run/reads_chart.py") and not is_chart_module("report/charts.py")
    assert not is_chart_module("report/chartless.py") and not is_chart_module("report/core/tables.py")


def test_a_lazy_or_submodule_import_of_matplotlib_is_seen_and_a_lookalike_name_is_not():
    src = ("import os\nimport matplotlib_inline\n"
           "def f():\n    import matplotlib.pyplot as plt\n\ndef g():\n    from matplotlib.colors import "
           "to_rgba\n")
    assert matplotlib_importers({"x.py": src}) == ["x.py:4", "x.py:7"]
