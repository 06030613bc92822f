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
    ("generator", ("generator", "imports")),  # made graphs and read ones: both write the dataset format
    ("truth", ("truth",)),
    ("systems", ("systems", "systems.*.system")),  # the loader, the contract and every declaration
    ("backends", ("backends", "systems.*.*")),  # a system folder's adapter and its parts
    ("provision", ("provision", "systems.*.native")),  # a system folder's native recipe
    ("results", ("results",)),  # the results store: records in, records out
    ("workloads", ("workloads",)),  # what to run, as data
    ("measure", ("measure",)),  # running it: the runner, its workers, the one timing of an op
    ("run", ("config", "run")),
    ("report", ("report",)),
    ("command", ("commands", "decide", "tools", "systems.*.tools")),  # a system folder's own tools too
    ("cli", ("cli",)),
]

# Upward imports kept, each with its reason; a test fails when one is no longer in the code. None is left: the
# last, the Scylla adapter building its SSTable helper under compose, now gets the helper's command in its
# endpoint from its declaration's `tools`, which provisioning adds.
ALLOWED_UP: dict[tuple[str, str], str] = {}

# The adapter side (backends/ and every system folder's adapter and parts) and the recipe side (provision/ and
# every folder's native.py) never import each other, in either direction: run/servers.py, in the run layer,
# hands an adapter to provisioning.
APART = ("adapter", "recipe")


# run/ is one chain, lowest first (docs/ARCHITECTURE.md): a run module imports only the run modules before it,
# so the drivers (orchestrate, then the sweeps and the load test on top) call down to one phase (phase.py),
# which calls down to the runner, and nothing below climbs back to a driver. A module not yet written (or
# gone) is skipped; a run module missing from the chain fails.
RUN_CHAIN = ("servers", "loading", "restore", "dataset", "phase_plan", "progress", "phase", "orchestrate",
             "sweep", "shape", "loadtest", "perf")

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


def _under(rel: str, name: str) -> bool:
    """`rel` is the module or package `name` or inside it; a `*` part of `name` matches any one part."""
    parts, pattern = rel.split(".") if rel else [], name.split(".")
    return len(parts) >= len(pattern) and all(
        p == "*" or p == q for p, q in zip(pattern, parts, strict=False))


def layer_of(module: str) -> tuple[int, str]:
    """(rank, name) of a module's layer: the layer of the longest LAYERS name that is it or a package of
    it."""
    rel = module.partition(".")[2]  # "" for authzbench/__init__.py
    found = [(len(n), rank, layer) for rank, (layer, names) in enumerate(LAYERS) for n in names
             if (rel == n if not n else _under(rel, n))]
    if not found:
        raise KeyError(f"{module} is in no layer: place it in LAYERS (tests/unit/test_imports.py)")
    _, rank, layer = max(found)
    return rank, layer


def upward(g: dict[str, set[str]]) -> list[str]:
    """One message per import of a higher layer's module: the importer and the imported, each with its
    layer."""
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
    assert upward(
        {"authzbench.schema.model": {"authzbench.truth.oracle"},
         "authzbench.truth.oracle": {"authzbench.schema.model"}}
    ) == ["upward import:\n  authzbench.schema.model (layer 1 model)\n  imports authzbench.truth.oracle "
          "(layer 3 truth)"]
    assert layer_of("authzbench.backends.registry") == (5, "backends")
    assert layer_of("authzbench.systems.scylla.cql") == (5, "backends")
    assert layer_of("authzbench.systems.scylla.native") == (6, "provision")
    assert layer_of("authzbench.systems.scylla.system") == (4, "systems")
    assert layer_of("authzbench.systems") == (4, "systems")
    assert layer_of("authzbench.systems.contract") == (4, "systems")
    assert layer_of("authzbench.systems.permify.tools.clients") == (12, "command")
    assert [
        layer_of(f"authzbench.{m}")[1] for m in ("results.store", "workloads.spec", "measure.runner")
    ] == ["results", "workloads", "measure"]
    assert layer_of("authzbench") == (0, "base")


def test_architecture_md_states_the_same_layers():
    rows = re.findall(
        r"^\| (\d+) \| (\w+) \| (.+) \|$", (ROOT.parent / "docs/ARCHITECTURE.md").read_text(), re.M)
    assert [(int(n), layer) for n, layer, _ in rows] == [(i, layer) for i, (layer, _) in enumerate(LAYERS)]
    for (_, layer, mods), (_, names) in zip(rows, LAYERS, strict=True):
        named = {m.removesuffix(".py").removesuffix("/") for m in re.findall(r"`([\w/.<>]+)`", mods)}
        assert {as_path(n) for n in names if n} <= named, layer


def as_path(name: str) -> str:
    """A LAYERS name as the document writes it: "systems.*.native" -> "systems/<name>/native"; a trailing
    `*` (every module of the folder) is the folder itself."""
    return name.replace(".", "/").replace("*", "<name>").removesuffix("/<name>") if "*" in name else name


def side(module: str) -> str:
    """"adapter", "recipe" or "" (neither): the side of the adapter/recipe split a module is on."""
    return {"backends": "adapter", "provision": "recipe"}.get(layer_of(module)[1], "")


def between(g: dict[str, set[str]], a: str, b: str) -> list[str]:
    """Every import from side `a` into side `b` or back, as 'importer -> imported'."""
    return [f"{n} -> {d}" for n in sorted(g) for d in sorted(g[n]) if {side(n), side(d)} == {a, b}]


def test_adapters_and_recipes_never_import_each_other_in_any_system_folder():
    g = graph()
    folders = {n.split(".")[2] for n in g if n.count(".") == 3 and n.startswith("authzbench.systems.")}
    assert {"scylla", "spicedb", "postgres"} <= folders  # the check sees every folder's modules
    assert between(g, *APART) == []


def test_the_apart_check_finds_an_import_either_way():
    g = {"authzbench.systems.scylla.adapter": {"authzbench.systems.scylla.native", "authzbench.core.errors"},
         "authzbench.systems.mongo.native": {"authzbench.systems.mongo.load"},
         "authzbench.provision.compose": {"authzbench.backends.registry"},
         "authzbench.run.servers": {"authzbench.backends.registry", "authzbench.provision.manager"}}
    assert between(g, *APART) == ["authzbench.provision.compose -> authzbench.backends.registry",
                                  "authzbench.systems.mongo.native -> authzbench.systems.mongo.load",
                                  "authzbench.systems.scylla.adapter -> authzbench.systems.scylla.native"]


def test_a_declaration_imports_the_contract_only():
    g = graph()
    declarations = [n for n in g if n.startswith("authzbench.systems.") and n.endswith(".system")]
    assert len(declarations) >= 9
    assert {n: sorted(g[n]) for n in declarations if g[n] != {"authzbench.systems.contract"}} == {}


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
TRUTH_BACKEND = "authzbench.systems.reference.adapter"


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
    backends = [n for n in g if side(n) == "adapter" and n != TRUTH_BACKEND]
    assert "authzbench.backends.expansion" in backends and "authzbench.systems.scylla.adapter" in backends
    leaks = {n: sorted(reachable(g, n, {TRUTH_BACKEND}) & TRUTH) for n in backends}
    assert {n: t for n, t in leaks.items() if t} == {}
    assert reachable(g, TRUTH_BACKEND, set()) & TRUTH  # the check sees the reference's import of the truth


def test_the_reachability_check_finds_an_import_two_modules_away():
    g = {"b.x": {"y"}, "y": {"authzbench.truth.oracle"}, "b.ref": {"authzbench.truth.oracle"}}
    assert reachable(g, "b.x", set()) & TRUTH == {"authzbench.truth.oracle"}
    assert reachable(g, "b.x", {"y"}) == set()


def test_a_folder_importing_a_higher_folder_is_an_upward_import(tmp_path: Path):
    # A fake tree with the real folder names: the layer comes from the folder alone, whatever the module's
    # name.
    for rel, text in {
        "core/clock.py": "from authzbench.run import driver\n", "run/driver.py": "",
        "schema/shape.py": "from ..truth.judge import ok\n", "truth/judge.py": "ok = 1\n",
        "results/keep.py": "from authzbench.workloads import plan\n",
        "workloads/plan.py": "from authzbench.measure.loop import go\n", "measure/loop.py": "go = 1\n",
        "measure/reads.py": "from authzbench.workloads import plan\nfrom authzbench.results import keep\n",
    }.items():
        (tmp_path / "authzbench" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "authzbench" / rel).write_text(text)
    paths = {
        "authzbench." + p.relative_to(tmp_path / "authzbench").with_suffix("").as_posix().replace("/", "."): p
        for p in (tmp_path / "authzbench").rglob("*.py")}
    g = {name: imported(name, path, set(paths)) for name, path in paths.items()}
    assert [m.split("\n")[1].strip() for m in upward(g)] == [
        "authzbench.core.clock (layer 0 base)", "authzbench.results.keep (layer 7 results)",
        "authzbench.schema.shape (layer 1 model)", "authzbench.workloads.plan (layer 8 workloads)"]


def test_the_package_root_holds_only_a_handful_of_modules():
    assert sorted(p.stem for p in ROOT.glob("*.py")) == ["__init__", "cli", "commands", "config"]


def chain_breaks(g: dict[str, set[str]]) -> list[str]:
    """One message per run module missing from RUN_CHAIN and per import of a run module at or after its own
    place."""
    place = {f"authzbench.run.{m}": i for i, m in enumerate(RUN_CHAIN)}
    out = []
    for name in sorted(n for n in g if n.startswith("authzbench.run.")):
        if name not in place:
            out.append(f"{name} is not in RUN_CHAIN")
            continue
        out += [f"{name} imports {dep}, later in the run chain" for dep in sorted(g[name])
                if dep in place and place[dep] >= place[name]]
    return out


def test_each_run_module_imports_only_run_modules_before_it_in_the_chain():
    assert chain_breaks(graph()) == []


def test_the_chain_check_finds_an_import_back_up_the_chain_and_an_unplaced_module():
    g = {"authzbench.run.phase": {"authzbench.run.orchestrate", "authzbench.run.servers"},
         "authzbench.run.orchestrate": {"authzbench.run.phase"}, "authzbench.run.extra": set()}
    assert chain_breaks(g) == [
        "authzbench.run.extra is not in RUN_CHAIN",
        "authzbench.run.phase imports authzbench.run.orchestrate, later in the run chain"]


def test_architecture_md_states_the_same_run_chain():
    doc = (ROOT.parent / "docs/ARCHITECTURE.md").read_text()
    line = next(ln for ln in doc.splitlines() if ln.startswith("The run chain, lowest first:"))
    assert tuple(re.findall(r"`run/(\w+)\.py`", line)) == RUN_CHAIN
