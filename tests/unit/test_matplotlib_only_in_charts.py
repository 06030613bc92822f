"""Every chart goes through report/core/charts.py (issue 57): no other module of authzbench/ imports
matplotlib, at its top or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import authzbench

ROOT = Path(authzbench.__file__).parent
CHARTS = "report/core/charts.py"


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


def test_no_module_but_charts_imports_matplotlib():
    modules = {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted(ROOT.rglob("*.py"))}
    others = {name: src for name, src in modules.items() if name != CHARTS}
    assert matplotlib_importers({CHARTS: modules[CHARTS]}), (
        "charts.py no longer imports matplotlib: update this test")
    assert not matplotlib_importers(others), "draw through report/core/charts.py"


def test_a_lazy_or_submodule_import_of_matplotlib_is_seen_and_a_lookalike_name_is_not():
    src = ("import os\nimport matplotlib_inline\n"
           "def f():\n    import matplotlib.pyplot as plt\n\ndef g():\n    from matplotlib.colors import "
           "to_rgba\n")
    assert matplotlib_importers({"x.py": src}) == ["x.py:4", "x.py:7"]
