"""No module under authzbench/ over MAX_MODULE_LINES lines and no function over MAX_FUNCTION_LINES (issue 46),
counted with ast: a module's lines as `len(text.splitlines())`, a function's (methods and nested functions
too) as end_lineno - lineno + 1, its decorators not counted.

STILL_OVER lists the modules not yet split. The list can only shrink: each must still be over, so a module
brought under the bound fails this test until it is taken off the list."""

from __future__ import annotations

import ast
from pathlib import Path

import authzbench

ROOT = Path(authzbench.__file__).parent
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 60

# Not yet split (issue 46): none now. The last two, the document stores, moved their load paths beside
# their adapters (elasticsearch_load.py; mongo_load.py and mongo_grants.py), so every module is bounded.
STILL_OVER: dict[str, str] = {}


def _modules() -> dict[str, Path]:
    return {p.relative_to(ROOT).as_posix(): p for p in sorted(ROOT.rglob("*.py"))}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_module_is_over_the_bound_but_the_listed_ones():
    over = {name: n for name, p in _modules().items() if (n := _lines(p)) > MAX_MODULE_LINES}
    unlisted = {name: n for name, n in over.items() if name not in STILL_OVER}
    assert not unlisted, f"modules over {MAX_MODULE_LINES} lines (split them along their jobs): {unlisted}"


def test_every_listed_module_is_still_over_so_the_list_only_shrinks():
    modules = _modules()
    gone = [name for name in STILL_OVER if name not in modules]
    under = {name: _lines(modules[name]) for name in STILL_OVER if name in modules
             and _lines(modules[name]) <= MAX_MODULE_LINES}
    assert not gone, f"STILL_OVER names modules that no longer exist; take them off: {gone}"
    assert not under, f"now within {MAX_MODULE_LINES} lines; take them off STILL_OVER: {under}"


def test_no_function_is_over_the_bound():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{name}:{node.lineno} {node.name} ({n} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


# Issue 57: no function in authzbench/ takes more than MAX_PARAMETERS parameters besides self / cls (a longer
# list is a dataclass of them, or the state of an object whose methods share it).
MAX_PARAMETERS = 8


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return [n for n in names if n not in ("self", "cls")]


def too_many_parameters(name: str, source: str) -> list[str]:
    return [
        f"{name}:{node.lineno} {node.name} ({len(parameters(node))} parameters)"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and len(parameters(node)) > MAX_PARAMETERS
    ]


def test_no_function_in_the_package_takes_more_than_eight_parameters():
    found = [
        line for name, path in _modules().items() for line in too_many_parameters(name, path.read_text())]
    assert not found, f"functions over {MAX_PARAMETERS} parameters besides self: {found}"


def test_the_parameter_count_sees_keyword_only_and_star_parameters_but_not_self():
    src = ("class C:\n    def m(self, a, b, c, d, *e, f, g, h, **i): ...\n"
           "    def n(self, a, b, c, d, e, f, g, h): ...\n")
    assert too_many_parameters("x.py", src) == ["x.py:2 m (9 parameters)"]
