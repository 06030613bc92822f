"""The terminal output has one home, core/console.py: every other module prints through its `console`
(stderr, `say`) or `stdout`, so progress lines and a command's result never go through two differently set
up consoles."""

from __future__ import annotations

import re
from pathlib import Path

import authzbench

ROOT = Path(authzbench.__file__).parent


def consoles_made(files: dict[str, str]) -> list[str]:
    """The files (relative names) that construct a rich Console of their own."""
    return sorted(name for name, text in files.items() if re.search(r"\bConsole\(", text))


def test_only_core_console_constructs_a_rich_console():
    files = {str(p.relative_to(ROOT)): p.read_text() for p in ROOT.rglob("*.py")}
    assert consoles_made(files) == ["core/console.py"]


def test_a_module_constructing_its_own_console_is_found():
    assert consoles_made(
        {"run/perf.py": "console = Console()\n", "core/console.py": "x = Console(stderr=True)"}
    ) == ["core/console.py", "run/perf.py"]
