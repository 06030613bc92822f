"""README.md is a guide (issue 46): short, its two commands as CI runs them, and no figure from a run (those
go stale; they live in the example reports, reports/README.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A measured figure: a number with a unit of time, size, rate or ratio, or a count of answers. Only prose is
# read: code (``` blocks and `spans`) is where option values live (`--concurrency 1,8,32`, `--rate 500`), and
# those are settings, not results.
_UNIT = (r"(?:ms|µs|us|s|secs?|seconds?|min|minutes?|h|hours?|[KMGT]i?B|bytes|%|x|×|"
         r"(?:relationships|ops|requests|checks|rows)/s|answers|mismatches|core-s)")
_FIGURE = re.compile(r"(?<![\w.,-])\d[\d,]*(?:\.\d+)?\s?" + _UNIT + r"(?![\w/])")


def figures(markdown: str) -> list[str]:
    prose = re.sub(r"```.*?```", "", markdown, flags=re.S)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    return [m.group(0) for m in _FIGURE.finditer(prose)]


def test_the_figure_check_finds_run_figures_in_prose_and_not_option_values():
    measured = (
        "The run took 36 min (25.0 minutes by `time`), 363,031 answers, 0 mismatches; p50 1.28 ms, "
        "0.64x the client CPU, 49,101 relationships/s, 5,076 MiB written, 1.14 core-s, 143% of a core.")
    assert figures(measured) == [
        "36 min", "25.0 minutes", "363,031 answers", "0 mismatches", "1.28 ms", "0.64x",
        "49,101 relationships/s", "5,076 MiB", "1.14 core-s", "143%"]
    settings = (
        "`--concurrency 1,8,32`, `--rate 500 --duration 30`, `--slo-check-p95 25`, Python 3.11 on Debian "
        "12, 8 workers, 3 rounds over 2 visits, p95: 20, p99: 100.\n```bash\nsleep 5s\n```\n")
    assert figures(settings) == []


def test_the_readme_is_a_guide_of_at_most_200_lines_with_no_figure_from_a_run():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert figures(readme) == [], "a measured figure in README.md: quote it from a report in reports/ instead"


def test_the_readme_shows_the_two_commands_and_the_test_command_is_the_one_ci_runs():
    readme = (ROOT / "README.md").read_text().splitlines()
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.startswith("make ")]
    assert ci and all(ln in readme for ln in ci)
    block = readme[readme.index("## The two commands"):]
    commands = [ln for ln in block if ln.startswith("make ")][:2]
    assert [c.split()[:2] for c in commands] == [["make", "bench"], ["make", "test"]]
