"""The package's import graph has no cycle: every import statement of authzbench/ (top-level or inside a
function), read with ast, is an edge; a strongly connected component of more than one module is a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import authzbench

ROOT = Path(authzbench.__file__).parent


def modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The authzbench modules `name` imports: `from a.b import c` is a.b.c when that is a module, else a.b."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in out if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components with more than one member."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while (w := stack.pop()) != v:
                comp.add(w)
            comp.add(v)
            if len(comp) > 1:
                found.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {n: imported(n, p, set(mods)) for n, p in mods.items()}


def test_no_module_of_authzbench_takes_part_in_an_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_the_report_sections_import_the_shared_helpers_and_never_the_document():
    g = graph()
    assert "authzbench.report.tables" in g["authzbench.report.reads"]
    assert not any("authzbench.report.document" in deps for n, deps in g.items()
                   if n not in ("authzbench.report", "authzbench.report.document"))


# The ground truth and its expansion code: what the backends are checked against must not feed them.
TRUTH = {"authzbench.oracle", "authzbench.closure", "authzbench.social_oracle"}
# The oracle served as a backend for the harness tests: the one backend that is the truth.
TRUTH_BACKEND = "authzbench.backends.reference"


def reachable(g: dict[str, set[str]], start: str, stop: set[str]) -> set[str]:
    """Every module `start` imports, directly or through others, not walking into the `stop` modules."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for m in g.get(todo.pop(), ()):
            if m not in seen and m not in stop:
                seen.add(m)
                todo.append(m)
    return seen


def test_no_backend_but_reference_reaches_the_oracle_through_any_import():
    g = graph()
    backends = [n for n in g if n.startswith("authzbench.backends.") and n != TRUTH_BACKEND]
    assert "authzbench.backends.expansion" in backends and "authzbench.backends.scylla" in backends
    leaks = {n: sorted(reachable(g, n, {TRUTH_BACKEND}) & TRUTH) for n in backends}
    assert {n: t for n, t in leaks.items() if t} == {}
    assert reachable(g, TRUTH_BACKEND, set()) & TRUTH  # the check sees the reference's import of the truth


def test_the_reachability_check_finds_an_import_two_modules_away():
    g = {"b.x": {"y"}, "y": {"authzbench.oracle"}, "b.ref": {"authzbench.oracle"}}
    assert reachable(g, "b.x", set()) & TRUTH == {"authzbench.oracle"}
    assert reachable(g, "b.x", {"y"}) == set()
