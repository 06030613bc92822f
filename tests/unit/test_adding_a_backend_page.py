"""docs/ADDING-A-BACKEND.md lists every file a new backend touches; these tests walk that list, so the page
cannot drift from the tree: each named file exists, and each shared place it names holds every backend."""

from __future__ import annotations

import re
from pathlib import Path

from authzbench.report.core.charts import FIXED
from authzbench.systems import systems

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs/ADDING-A-BACKEND.md"


def touched_files() -> list[str]:
    """The backticked paths of the page's "The files it touches" sentence, up to its first full stop."""
    text = PAGE.read_text()
    start = text.index("The files it touches")
    sentence = text[start:text.index(". ", start)]
    return [p for p in re.findall(r"`([\w./*-]+)`", sentence) if "/" in p or "." in p]


def resolve(path: str) -> Path:
    # The page names package files from inside authzbench/ and the rest from the repository root.
    for base in (REPO, REPO / "authzbench"):
        if (base / path).exists():
            return base / path
    return REPO / path


def test_the_page_lists_the_shared_files_a_backend_touches():
    named = touched_files()
    for must in ("systems/NAME/system.py", "systems/NAME/adapter.py", "systems/NAME/native.py",
                 "compose/docker-compose.yaml", "compose/versions.env", "pyproject.toml"):
        assert must in named, must


def test_every_file_the_page_names_exists_for_an_existing_backend():
    # openfga has every kind of file (declaration, adapter, native recipe, backend tests), so NAME is replaced
    # by it.
    missing = []
    for path in touched_files():
        concrete = path.replace("NAME", "*" if "*" in path else "openfga")
        found = (
            [*REPO.glob(concrete)] if "*" in concrete else [resolve(concrete)] * resolve(concrete).exists())
        if not found:
            missing.append(path)
    assert missing == []


def test_each_shared_place_the_page_names_holds_every_backend():
    versions = (REPO / "compose/versions.env").read_text()
    extras = (REPO / "pyproject.toml").read_text()
    # a backend's colour is its declared slot, which charts.FIXED reads
    assert sorted(set(systems()) - set(FIXED)) == []
    with_extra = [entry.extra for entry in systems().values() if entry.extra]
    assert with_extra, "no backend has a pyproject extra: the check below would prove nothing"
    assert [e for e in with_extra if not re.search(rf"^{re.escape(e)}\s*=", extras, re.M)] == []
    # every server the compose file pins has its version in versions.env (the page's step for a new server)
    compose = (REPO / "compose/docker-compose.yaml").read_text()
    pinned = set(re.findall(r"\$\{(\w+_VERSION)", compose))
    assert pinned and [v for v in sorted(pinned) if f"{v}=" not in versions] == []
