"""docs/ARCHITECTURE.md names every module of authzbench/: a newcomer finds where each file's job is described."""

from __future__ import annotations

import re
from pathlib import Path

import authzbench

ROOT = Path(authzbench.__file__).parent
DOC = ROOT.parent / "docs" / "ARCHITECTURE.md"


def unnamed(doc: str) -> list[str]:
    """Modules whose file name (`name.py`) or name (`name`, as the report pipeline lists its sections) is not
    a word of the document."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?:\.py)?", doc))
    return sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                  if p.name != "__init__.py" and p.name not in words and p.stem not in words)


def test_the_architecture_document_names_every_module():
    assert unnamed(DOC.read_text()) == []


def test_a_module_the_document_does_not_name_is_reported():
    assert "tools/examples.py" in unnamed(DOC.read_text().replace("examples", "ex"))
