"""docs/ARCHITECTURE.md names every module of authzbench/: a newcomer finds where each file's job is
described."""

from __future__ import annotations

import re
from pathlib import Path

import authzbench

ROOT = Path(authzbench.__file__).parent
DOC = ROOT.parent / "docs" / "ARCHITECTURE.md"


def unnamed(doc: str) -> list[str]:
    """Modules whose file name (`name.py`) or name (`name`, as the report pipeline lists its sections) is not
    a word of the document. A system folder's modules are named by the folder pattern, `systems/<name>/`,
    when the document states it (their layout is systems/contract.py's): a new folder needs no line here."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?:\.py)?", doc))
    pattern = "`systems/<name>/`" in doc
    return sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                  if p.name != "__init__.py" and p.name not in words and p.stem not in words
                  and not (pattern and in_a_system_folder(p)))


def in_a_system_folder(p: Path) -> bool:
    rel = p.relative_to(ROOT).parts
    return len(rel) >= 3 and rel[0] == "systems"


def test_the_architecture_document_names_every_module():
    assert unnamed(DOC.read_text()) == []


def test_a_module_the_document_does_not_name_is_reported():
    assert "tools/examples.py" in unnamed(DOC.read_text().replace("examples", "ex"))


def test_a_system_folder_is_named_by_the_pattern_and_only_while_the_document_states_it():
    doc = DOC.read_text()
    assert unnamed(doc.replace("`systems/<name>/`", "systems")) != []
    assert "systems/contract.py" not in unnamed(doc)
