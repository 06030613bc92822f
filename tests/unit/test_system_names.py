"""No module of authzbench/ outside authzbench/systems/ names a system: every string literal (docstrings
aside: prose) and every identifier (names, attributes, functions, classes, arguments, imported modules) is
searched, case-insensitively, for each declared backend name, each folder name and each declared alias.

A name matches where a word starts (not after a letter or digit), so `OpenFGABackend` and `SPICEDB_VERSION`
match and `pymongo` (a driver) or `cockroachdb` for `chdb` do not. Two names are also ordinary words here and
are searched only as a whole string literal, the way a module selects a backend (`"postgres" in backends`):
`reference` (the published reference report, `--against-reference`) and `postgres` (PostgreSQL is the shared
datastore of the engines: `pgcluster.py`, `pgsize.py`, DSNs); `PostgreSQL` itself is not an alias. Literals
equal to such a name that mean the word, not the backend, are listed in WORD_USES with why.

What the report states about one system is read from that system's declaration (report/core/declared.py); the
figures it quotes from a published document naming the engines measured there are read from the report's data
files (report/core/*.json), which are not modules. No module is exempt.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import authzbench
from authzbench.systems import folders, systems

ROOT = Path(authzbench.__file__).parent
AMBIGUOUS = {"reference", "postgres"}  # ordinary words here: searched as whole string literals only
# (module, literal) -> why the literal is the word, not the backend
WORD_USES = {
    (
        "provision/pgcluster.py", "postgres",
    ): "PostgreSQL's superuser role, which every private cluster runs as",
    ("workloads/stats.py", "reference"): "the column of the published reference report's dataset totals",
}


def names() -> set[str]:
    found = set(folders())
    for s in systems().values():
        found |= {s.name, *s.aliases}
    return {n.lower() for n in found}


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, kinds) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def words(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, "literal" | "identifier", text) of every string literal but docstrings and every identifier."""
    docs, out = _docstrings(tree), []
    for n in ast.walk(tree):
        line = getattr(n, "lineno", 0)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            out.append((line, "literal", n.value))
        for attr in ("id", "attr", "arg", "module", "asname"):
            value = getattr(n, attr, None)
            if isinstance(value, str) and not (
                attr == "arg" and isinstance(n, ast.keyword) and value is None):
                out.append((line, "identifier", value))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.alias)):
            out.append((line, "identifier", n.name))
    return out


def naming(rel: str, source: str, searched: set[str]) -> list[str]:
    """One line per place `source` (module `rel`) names a system."""
    found = []
    plain = sorted(searched - AMBIGUOUS)
    pattern = re.compile(r"(?<![a-z0-9])(" + "|".join(map(re.escape, plain)) + ")", re.I) if plain else None
    for line, kind, text in words(ast.parse(source)):
        hit = pattern.search(text) if pattern else None
        if hit:
            found.append(f"{rel}:{line}: {kind} {text[:60]!r} names {hit.group(1).lower()!r}")
        elif kind == "literal" and text in AMBIGUOUS & searched and (rel, text) not in WORD_USES:
            found.append(f"{rel}:{line}: literal {text!r} names the backend {text!r}")
    return found


def modules_outside_systems() -> dict[str, Path]:
    return {str(p.relative_to(ROOT)): p for p in sorted(ROOT.rglob("*.py"))
            if p.relative_to(ROOT).parts[0] != "systems"}


def test_no_module_outside_the_system_folders_names_a_system():
    searched = names()
    found = {rel: naming(rel, p.read_text(), searched) for rel, p in modules_outside_systems().items()}
    assert [h for rel in sorted(found) for h in found[rel]] == []


def test_the_search_finds_a_name_in_an_identifier_a_literal_and_an_import_but_not_in_prose():
    src = ('"""SpiceDB prose is allowed."""\nimport authzbench.systems.spicedb.adapter\nSPICEDB_POOL = 1\n'
           'x = "uses openfga"\ny = "pymongo"\nif "postgres" in b:\n    pass\nz = "PostgreSQL 15"\n')
    hits = naming("m.py", src, {"spicedb", "openfga", "mongo", "postgres"})
    assert [h.split(": ", 1)[1] for h in hits] == [
        "identifier 'authzbench.systems.spicedb.adapter' names 'spicedb'",
        "identifier 'SPICEDB_POOL' names 'spicedb'",
        "literal 'uses openfga' names 'openfga'",
        "literal 'postgres' names the backend 'postgres'"]


def test_every_declared_name_and_alias_is_searched():
    searched = names()
    assert {"spicedb", "spicedb-pg", "cassandra", "ferretdb", "chdb", "reference", "postgres"} <= searched


def test_a_report_module_naming_a_system_is_found_as_any_other_module_is():
    src = 'HEAD = "| Published SpiceDB vCPU |"\nLEGACY = {"FerretDB": "MongoDB"}\n'
    hits = naming("report/capacity.py", src, names())
    assert [h.split(": ", 1)[1] for h in hits] == [
        "literal '| Published SpiceDB vCPU |' names 'spicedb'", "literal 'FerretDB' names 'ferretdb'",
        "literal 'MongoDB' names 'mongo'"]
