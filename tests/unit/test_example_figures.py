"""Every committed example printed by one rule (issue 67, items 5 and 10): a figure of the JSON prints the
same digits in the main report and in the appendix, and no appendix line is over 400 characters. These read
the committed files, so they hold once every example is re-rendered (test_example_reports re-renders each)."""

from __future__ import annotations

import json
import re

import pytest

from authzbench.core.numbers import num
from authzbench.report.core.fold import MAX_LINE
from authzbench.tools.examples import REPORTS, examples

BENCH = [ex for ex in examples() if (REPORTS / ex.report.replace(".md", ".json")).is_file()]


def _appendix(ex) -> str:
    return (REPORTS / ex.report.replace(".md", "-appendix.md")).read_text()


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in BENCH])
def test_no_line_of_an_examples_appendix_is_over_400_characters(ex):
    long = [(i, len(ln)) for i, ln in enumerate(_appendix(ex).splitlines(), 1) if len(ln) > MAX_LINE]
    assert not long, long


def _findings(main: str) -> dict[tuple[str, str], str]:
    """(title, backend) -> the number the Findings print beside the backend (folded lines joined)."""
    items = re.sub(r"\n  (?=\S)", " ", main).splitlines()
    out = {}
    for ln in items:
        if m := re.match(r"- \[(.+?) \([^()]*\)\]\(#", ln):
            for b, v in re.findall(r"\*\*([\w-]+)(?: [†‡])?\*\* ([\d,]+(?:\.\d+)?)", ln):
                out[(m.group(1), b)] = v
    return out


def _ranked_table(ex) -> dict[tuple[str, str], str]:
    """(title, backend) -> the figure the appendix's "Every ranked figure" table prints."""
    out = {}
    for ln in _appendix(ex).split("## Every ranked figure")[1].splitlines():
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if ln.startswith("|") and len(cells) > 3:
            out[(cells[0], cells[1].rstrip(" †‡"))] = cells[2]
    return out


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in BENCH])
def test_every_json_figure_prints_the_same_digits_in_the_main_report_and_the_appendix(ex):
    """The JSON's value, printed by num(), is what the appendix's ranked-figure table and the main report's
    Findings show: a half-way value (45,084.5) rounded two ways showed 45,085 in one and 45,084 in the
    other."""
    figs = json.loads((REPORTS / ex.report.replace(".md", ".json")).read_text())["figures"]
    main, table = _findings((REPORTS / ex.report).read_text()), _ranked_table(ex)
    checked = 0
    for f in figs:
        if f["value"] is None or f["text"]:
            continue
        key, text = (f["title"], f["backend"]), num(f["value"])
        assert table.get(key) == text, (key, f["value"], table.get(key), text)
        if key in main:
            assert main[key] == text, (key, f["value"], main[key], text)
            checked += 1
    assert checked > len(figs) / 2, checked  # the Findings list most figures: the parse found them
