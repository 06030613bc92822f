"""The terminal output every layer shares: `console` on stderr for progress and errors (`say`), so a report
printed on stdout stays clean, and `stdout` for what a command prints as its result."""

from __future__ import annotations

from rich.console import Console

console = Console(stderr=True, highlight=False, soft_wrap=True)
stdout = Console()


def say(msg: str) -> None:
    """Progress output for long installs, starts and runs (stderr, so reports on stdout stay clean)."""
    console.print(f"[dim]authzbench[/dim] {msg}")
