"""The package's import graph has no cycle and no import points up a layer: every import statement of
authzbench/ (top-level or inside a function, `if TYPE_CHECKING:` blocks too), read with ast, is an edge; a
strongly connected component of more than one module is a cycle; an edge from a module to one in a higher
layer of LAYERS is an upward import. docs/ARCHITECTURE.md states the same order."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import authzbench

ROOT = Path(authzbench.__file__).parent

# The layers, lowest first (docs/ARCHITECTURE.md): a module may import its own layer and the ones below, never
# one above. A name (under authzbench.) is a module or a package with all its modules; the longest name that
# matches a module places it; "" is authzbench/__init__.py. Imports under `if TYPE_CHECKING:` count too (there
# are none): an annotation that needs a higher layer's type is the same dependency.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("", "core")),  # leaf utilities
    ("model", ("schema",)),
    ("generator", ("generator",)),
    ("truth", ("truth",)),
    ("backends", ("backends",)),
    ("provision", ("provision",)),
    ("measure", ("scenarios",)),
    ("run", ("config", "run")),
    ("report", ("report",)),
    ("command", ("commands", "tools")),
    ("cli", ("cli",)),
]

# Upward imports kept, each with its reason; a test fails when one is no longer in the code. None is left: the
# last, the Scylla adapter building its SSTable helper under compose, now gets the helper's command in its
# endpoint from authzbench/run/stack.py, which joins backends/ and provision/.
ALLOWED_UP: dict[tuple[str, str], str] = {}

# backends/ (the adapters and their registry) and provision/ (starting servers) never import each other, in
# either direction: authzbench/run/stack.py, in the run layer, joins them.
APART = ("authzbench.backends", "authzbench.provision")


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


def layer_of(module: str) -> tuple[int, str]:
    """(rank, name) of a module's layer: the layer of the longest LAYERS name that is it or a package of it."""
    rel = module.partition(".")[2]  # "" for authzbench/__init__.py
    found = [(len(n), rank, layer) for rank, (layer, names) in enumerate(LAYERS) for n in names
             if rel == n or rel.startswith(n + ".")]
    if not found:
        raise KeyError(f"{module} is in no layer: place it in LAYERS (tests/unit/test_imports.py)")
    _, rank, layer = max(found)
    return rank, layer


def upward(g: dict[str, set[str]]) -> list[str]:
    """One message per import of a higher layer's module: the importer and the imported, each with its layer."""
    out = []
    for name in sorted(g):
        rank, layer = layer_of(name)
        for dep in sorted(g[name]):
            dep_rank, dep_layer = layer_of(dep)
            if dep_rank > rank and (name, dep) not in ALLOWED_UP:
                out.append(f"upward import:\n  {name} (layer {rank} {layer})\n"
                           f"  imports {dep} (layer {dep_rank} {dep_layer})")
    return out


def test_every_module_of_authzbench_is_in_a_layer():
    unplaced = []
    for m in modules():
        try:
            layer_of(m)
        except KeyError:
            unplaced.append(m)
    assert unplaced == []


def test_no_module_of_authzbench_imports_a_module_of_a_higher_layer():
    found = upward(graph())
    assert not found, "\n".join(found)


def test_each_allowed_upward_import_is_still_in_the_code():
    g = graph()
    assert [edge for edge in ALLOWED_UP if edge[1] not in g.get(edge[0], set())] == []


def test_the_layer_check_finds_an_import_of_a_higher_layer():
    assert upward({"authzbench.schema.model": {"authzbench.truth.oracle"}, "authzbench.truth.oracle": {"authzbench.schema.model"}}) == [
        "upward import:\n  authzbench.schema.model (layer 1 model)\n  imports authzbench.truth.oracle (layer 3 truth)"]
    assert layer_of("authzbench.backends.registry") == (4, "backends")
    assert layer_of("authzbench") == (0, "base")


def test_architecture_md_states_the_same_layers():
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (.+) \|$", (ROOT.parent / "docs/ARCHITECTURE.md").read_text(), re.M)
    assert [(int(n), layer) for n, layer, _ in rows] == [(i, layer) for i, (layer, _) in enumerate(LAYERS)]
    for (_, layer, mods), (_, names) in zip(rows, LAYERS, strict=True):
        named = {m.removesuffix(".py").removesuffix("/") for m in re.findall(r"`([\w/.]+)`", mods)}
        assert {n for n in names if n} <= named, layer


def between(g: dict[str, set[str]], a: str, b: str) -> list[str]:
    """Every import from package `a` into package `b` or back, as 'importer -> imported'."""
    inside = {a: lambda m: m == a or m.startswith(a + "."), b: lambda m: m == b or m.startswith(b + ".")}
    return [f"{n} -> {d}" for n in sorted(g) for d in sorted(g[n])
            if (inside[a](n) and inside[b](d)) or (inside[b](n) and inside[a](d))]


def test_backends_and_provision_never_import_each_other():
    assert between(graph(), *APART) == []


def test_the_apart_check_finds_an_import_either_way():
    g = {"authzbench.backends.scylla": {"authzbench.provision.native.cassandra", "authzbench.core.errors"},
         "authzbench.provision.compose": {"authzbench.backends.registry"},
         "authzbench.run.stack": {"authzbench.backends.registry", "authzbench.provision.manager"}}
    assert between(g, *APART) == ["authzbench.backends.scylla -> authzbench.provision.native.cassandra",
                                  "authzbench.provision.compose -> authzbench.backends.registry"]


def test_no_module_of_authzbench_takes_part_in_an_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_the_report_sections_import_the_shared_helpers_and_never_the_document():
    g = graph()
    assert "authzbench.report.core.tables" in g["authzbench.report.reads"]
    assert not any("authzbench.report.document" in deps for n, deps in g.items()
                   if n not in ("authzbench.report", "authzbench.report.document"))


# The ground truth and its expansion code: what the backends are checked against must not feed them.
TRUTH = {"authzbench.truth.oracle", "authzbench.schema.closure", "authzbench.truth.social_oracle"}
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
    g = {"b.x": {"y"}, "y": {"authzbench.truth.oracle"}, "b.ref": {"authzbench.truth.oracle"}}
    assert reachable(g, "b.x", set()) & TRUTH == {"authzbench.truth.oracle"}
    assert reachable(g, "b.x", {"y"}) == set()


def test_a_folder_importing_a_higher_folder_is_an_upward_import(tmp_path: Path):
    # A fake tree with the real folder names: the layer comes from the folder alone, whatever the module's name.
    for rel, text in {"core/clock.py": "from authzbench.run import driver\n", "run/driver.py": "",
                      "schema/shape.py": "from ..truth.judge import ok\n", "truth/judge.py": "ok = 1\n"}.items():
        (tmp_path / "authzbench" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "authzbench" / rel).write_text(text)
    paths = {"authzbench." + p.relative_to(tmp_path / "authzbench").with_suffix("").as_posix().replace("/", "."): p
             for p in (tmp_path / "authzbench").rglob("*.py")}
    g = {name: imported(name, path, set(paths)) for name, path in paths.items()}
    assert [m.split("\n")[1].strip() for m in upward(g)] == [
        "authzbench.core.clock (layer 0 base)", "authzbench.schema.shape (layer 1 model)"]


def test_the_package_root_holds_only_a_handful_of_modules():
    assert sorted(p.stem for p in ROOT.glob("*.py")) == ["__init__", "cli", "commands", "config"]
