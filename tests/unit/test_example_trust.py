"""Every committed example read closely, as a reviewer would (issues 55, 67): letters that mean what they say
in both directions, every stand-in marked where the main report names it, short lines, ⚠ by one rule, one
value per figure across the summary, the appendix and the JSON. The committed files are what their results
render to (test_example_reports re-renders each), so these checks read them as committed."""

from __future__ import annotations

import json
import math
import re

import pytest

from authzbench.report.core.noise import overlap
from authzbench.report.core.tables import num
from authzbench.tools.examples import REPORTS, examples

BENCH = [ex for ex in examples() if (REPORTS / ex.report.replace(".md", ".json")).is_file()]
MAX_LINE = 400  # characters of one main-report line: a table row wider than a design doc's page is unread


def _figures(ex) -> list[dict]:
    return json.loads((REPORTS / ex.report.replace(".md", ".json")).read_text())["figures"]


def _interval(f: dict) -> tuple[float, float]:
    lo, hi = f["interval"]
    return (-math.inf if lo is None else lo), (math.inf if hi is None else hi)


def _assumed(f: dict) -> bool:
    return f.get("interval_kind") == "assumed"


def _clearly_better(a: dict, b: dict) -> bool:
    """a's figure beats b's and their measured intervals are disjoint: the report's one pairwise rule (an
    assumed interval is never the ground of a clear difference)."""
    if a["value"] is None or b["value"] is None or a["value"] == b["value"] or _assumed(a) or _assumed(b):
        return False
    better = a["value"] > b["value"] if a["higher_is_better"] else a["value"] < b["value"]
    return better and not overlap(_interval(a), _interval(b))


def _rank_sets(ex) -> list[list[dict]]:
    """The figures lettered together: one dimension's networked backends, and its † ones apart."""
    sets: dict[tuple, list[dict]] = {}
    for f in _figures(ex):
        sets.setdefault((f["dimension"], f["networked"]), []).append(f)
    return list(sets.values())


def _better(a: dict, b: dict) -> bool:
    return a["value"] > b["value"] if a["higher_is_better"] else a["value"] < b["value"]


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in BENCH])
def test_two_figures_share_a_letter_exactly_when_they_are_not_clearly_apart_in_every_example(ex):
    for figs in _rank_sets(ex):
        lettered = [f for f in figs if f["letters"] is not None]
        assert all(f["text"] for f in figs if f["letters"] is None)  # unranked: a figure with no value only
        for a in lettered:
            for b in lettered:
                if a is not b:
                    apart = _clearly_better(a, b) or _clearly_better(b, a)
                    assert bool(set(a["letters"]) & set(b["letters"])) == (not apart), \
                        (a["dimension"], a["backend"], a["letters"], b["backend"], b["letters"])


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in BENCH])
def test_a_better_figure_never_shows_a_worse_standing_in_any_example(ex):
    """Issue 67: mongo 9.58 ms showed rank 2 above openfga 3.61 ms at rank 4 (8 such cases in
    20261129-201802)."""
    for figs in _rank_sets(ex):
        lettered = [f for f in figs if f["letters"] is not None]
        for a in lettered:
            assert a["standing"] == "abcdefghijklmnopqrstuvwxyz".index(a["letters"][0]) + 1, a
            for b in lettered:
                if _better(a, b):
                    assert a["standing"] <= b["standing"], (a["dimension"], a["backend"], b["backend"])


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in BENCH])
def test_every_interval_is_measured_or_stated_as_assumed_with_its_basis_in_every_example(ex):
    """A zero-width interval, a fixed factor (ingest 2x, memory 1.25x) and a ±1 poll are assumptions: flagged
    with their basis in the JSON and beside the interval in the appendix, never apart from another figure."""
    appendix = (REPORTS / ex.report.replace(".md", "-appendix.md")).read_text()
    table = appendix.split("## Every ranked figure")[1].split("\n## ")[0]
    for f in _figures(ex):
        if f["value"] is None or f["text"]:
            continue
        lo, hi = _interval(f)
        single = f["dimension"] in ("ingest", "memory", "visibility_p95", "footprint") or f[
            "dimension"].startswith("rows/")
        # a zero-width interval from ops is measured (rounds in one histogram bucket: 0.108-0.108 ms in
        # 20261128-083444); one without ops is a figure measured once
        if single or (lo == hi and f["n"] is None):
            assert _assumed(f) and f["interval_basis"], (f["dimension"], f["backend"], f["interval"])
        if _assumed(f):
            assert f"({f['interval_basis']})" in table, (f["dimension"], f["backend"])


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in BENCH])
def test_no_clearly_rests_on_an_assumed_interval_in_any_example(ex):
    """A need whose figures all rest on assumed intervals says no difference is claimed, never "clearly"."""
    from authzbench.report.decision import NEEDS

    figs, md = _figures(ex), (REPORTS / ex.report).read_text()
    for need in NEEDS:
        dim = _dimension(figs, need.keys)
        net = [f for f in figs if f["dimension"] == dim and f["networked"] and not f["text"]]
        line = next((ln for ln in md.splitlines() if ln.startswith(f"- **{need.label}**: ")), None)
        if line is None or len(net) < 2:
            continue
        if all(_assumed(f) for f in net):
            assert "clearly" not in line and "no difference is claimed" in line, line
        if "is best, clearly" in line:
            lead = next(f for f in net if f"**{label_of(f)}**" in line)
            assert all(_clearly_better(lead, f) for f in net if f is not lead), line


def label_of(f: dict) -> str:
    mark = " ‡" if "stand_in" in f["flags"] else " †" if "embedded" in f["flags"] else ""
    return f["backend"] + mark


def _prose(md: str) -> str:
    """The report's text without code spans, link targets and image paths, where a backend's bare name
    is a command-line value or a file name, not a figure's label."""
    md = re.sub(r"`[^`]*`", "", md)
    md = re.sub(r"\]\([^)]*\)", "]", md)
    return re.sub(r"\(#[^)]*\)", "", md)


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in BENCH])
def test_every_stand_in_and_embedded_engine_is_marked_wherever_the_main_report_names_it(ex):
    marks = {f["backend"]: "‡" if "stand_in" in f["flags"] else "†" for f in _figures(ex)
             if {"stand_in", "embedded"} & set(f["flags"])}
    text = re.sub(r"\s+", " ", _prose((REPORTS / ex.report).read_text()))  # a folded line reads as one
    for backend, mark in marks.items():
        bare = [
            m.start()
            for m in re.finditer(rf"(?<![\w-])(?<!{mark} ){re.escape(backend)}(?![\w-])(?!\** {mark})", text)]
        assert not bare, (backend, [text[max(0, i - 60):i + 40] for i in bare[:3]])


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in examples()])
def test_no_line_of_an_examples_main_report_is_over_400_characters(ex):
    long = [(i, len(ln)) for i, ln in enumerate((REPORTS / ex.report).read_text().splitlines(), 1)
            if len(ln) > MAX_LINE]
    assert not long, long


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in BENCH])
def test_every_ranked_figure_shows_the_jsons_value_in_the_appendix(ex):
    """The appendix's table of every ranked figure: its Figure column is the JSON's value, as the report
    writes numbers (or the figure's text, for a figure shown as words)."""
    appendix = (REPORTS / ex.report.replace(".md", "-appendix.md")).read_text()
    rows = appendix.split("## Every ranked figure")[1].split("\n## ")[0].splitlines()
    cells = [
        [c.strip() for c in r.strip("|").split("|")] for r in rows if r.startswith("| ") and "---" not in r]
    head, body = cells[0], cells[1:]
    figs = _figures(ex)
    assert len(body) == len(figs)
    col = head.index("Figure")
    for f, row in zip(figs, body, strict=True):
        assert row[col].endswith(f["text"] or num(f["value"])), (f["dimension"], f["backend"], row[col])


COMPARES = [ex for ex in examples() if ex.report.startswith("compare-")]


def _reads_rows(md: str) -> list[dict]:
    rows = md.split("## Reads")[1].split("\n## ")[0].strip().splitlines()
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in r.strip("|").split("|")), strict=True)) for r in rows[2:]
            if r.startswith("|")]


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in COMPARES])
def test_a_comparisons_p50_of_each_run_is_that_runs_own_figure(ex):
    """`report --compare`'s p50 A and p50 B are the figure each run's own report and JSON show."""
    runs = [r.split("/", 1)[1] for r in ex.runs]
    own = {}
    for side, run in zip("AB", runs, strict=True):
        path = REPORTS / f"{run}.json"
        if path.is_file():
            own[side] = {(f["backend"], f["dimension"].split("/", 1)[1]): f["value"]
                         for f in json.loads(path.read_text())["figures"]
                         if f["dimension"].startswith("check_p50/")}
    rows = [r
            for r in _reads_rows((REPORTS / ex.report).read_text())
            if r["Op"] == "check" and r["Workers"] == "1"]
    checked = 0
    for side, figs in own.items():
        for r in rows:
            v = figs.get((r["Backend"].rstrip(" ‡†"), r["Scenario"]))
            if v is not None:
                assert float(r[f"p50 {side} (ms)"].replace(",", "")) == pytest.approx(
                    v, rel=5e-3, abs=6e-4), r
                checked += 1
    assert checked or not own


# Lines that state a definition, a setting or a recorded fact (a version, the machine), not a measurement:
# they may read the same in every run. Anything else with a number that does not move when every
# measurement does is fixed text posing as a measurement ("loads moved up to 2.3x between runs").
DEFINITIONS = (
    r"^- CPU", r"^- Memory: ", r"logical cores",
    r"timeouts \(check",
    r"HdrHistogram",
    r"\(PSS",
    r"^Dataset `", r"SLO: check p95", r"measured once", r"^One worker, the backend's own",
    r"^Two backends are in different", r"^p50 / p95 at 1 worker", r"^Cell: figure", r"embedded \(chdb\)",
    r"assumed to lie within", r"taken to lie within", r"^- CPU % is summed", r"Every measured op is recorded",
    r"^- Server memory is", r"^◐: client-bound", r"^Checks with [\d.]+% writes",
    r"^Per dimension, backends best figure first", r"^A backend is clearly better than",
    r"^Not answered here: another size")  # the dataset's size and the churn sweep's settings, as `^Dataset`


def _numeric_lines(md: str) -> set[str]:
    """Prose lines of a main report holding a number (tables, headings and chart lines aside)."""
    out = set()
    for ln in _logical_lines(md):
        if re.search(r"\d", ln) and not ln.startswith(("|", "#", "![", "- Captured", "- `")):
            out.add(ln)
    return out


def _logical_lines(md: str) -> list[str]:
    """The report's lines with each paragraph and list item whole: fold.fold_prose continues a line over 400
    characters on the next (the Cell legend's second line held its 75% and 25% thresholds, apart from the
    "Cell: figure" that marks it a definition)."""
    out: list[str] = []
    for ln in md.splitlines():
        starts = (
            not ln.strip()
            or ln.startswith(("|", "#", "![", "<", "- "))
            or not out
            or not out[-1].strip()
            or out[-1].startswith(("|", "#", "![", "<"))
        )
        if starts:
            out.append(ln)
        else:
            out[-1] += " " + ln.strip()
    return out


def _varied(recs: list[dict], k: float) -> list[dict]:
    """The same run with every measured quantity moved by k: memory, CPU, loads, footprint, rows, wall."""
    for r in recs:
        if r["type"] == "monitor":
            r.update(rss_bytes=int(r["rss_bytes"] * k), cpu_percent=r["cpu_percent"] * k,
                     client_cpu_percent=r["client_cpu_percent"] * k)
        elif r["type"] == "ingest":
            r.update(load_seconds=r["load_seconds"] * k, footprint_bytes=int(r["footprint_bytes"] * k),
                     batch_seconds=[x * k for x in r["batch_seconds"]])
        elif r["type"] == "phase_end":
            r.update(wall_s=r["wall_s"] * k, warmup_ops=int(r["warmup_ops"] * k))
        elif r["type"] == "interval":
            r["checked"] = int(r["checked"] * k)
            if "rows" in (r.get("extra") or {}):
                r["extra"] = {**r["extra"], "rows": int(r["extra"]["rows"] * k), "stale_allows": int(k > 1)}
    return recs


def _render_scaled(tmp_path, monkeypatch, scale: float) -> str:
    from authzbench.report.document import render
    from tests.unit import test_report_invariants as inv
    monkeypatch.setattr(inv, "BACKENDS", {b: (i, ms * scale) for b, (i, ms) in inv.BACKENDS.items()})
    run = inv._recorded_run()
    run.recs = _varied(run.recs, scale)
    return render(run.write(tmp_path / f"run{scale}"), tmp_path / f"out{scale}").read_text()


@pytest.mark.slow
def test_no_numeric_sentence_of_the_main_report_stays_the_same_when_every_measurement_changes(
    tmp_path, monkeypatch):
    one, three = (_numeric_lines(_render_scaled(tmp_path, monkeypatch, s)) for s in (1.0, 3.0))
    fixed = [ln for ln in one & three if not any(re.search(d, ln) for d in DEFINITIONS)]
    assert not fixed, fixed


def _summary_rows(md: str) -> tuple[list[str], list[list[str]]]:
    # the needs table (a run with the operating envelope has the workload table before it)
    rows = [
        r for r in md.split("## Decision summary")[1].split("\n\n| Need |")[1].split("\n\n")[0].splitlines()]
    rows[0] = " Need |" + rows[0]
    cells = [
        [c.strip() for c in ("| " + r if i == 0 else r).strip("|").split("|")] for i, r in enumerate(rows)]
    return [re.sub(r" [‡†]$", "", h) for h in cells[0][2:]], [c for c in cells[2:]]


def _dimension(figs: list[dict], keys: tuple[str, ...]) -> str | None:
    present = list(dict.fromkeys(f["dimension"] for f in figs))
    for k in keys:
        hit = next((d for d in present if d == k or (k.endswith("/") and d.startswith(k))), None)
        if hit:
            return hit
    return None


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.report) for e in BENCH])
def test_every_decision_summary_cell_is_the_jsons_figure_letters_and_marks(ex):
    """One value, one letter set and one ⚠ per figure: the summary's cell is the JSON's, by the same rules."""
    from authzbench.report.decision import ASSUMED_MARK, NEEDS

    figs = _figures(ex)
    backends, rows = _summary_rows((REPORTS / ex.report).read_text())
    needs = {n.label: n for n in NEEDS}
    for row in rows:
        label = row[0].removesuffix(f" {ASSUMED_MARK}")
        # a titled need's row is labelled by its dimension's title ("Stale allows, own read mode, 8 writers")
        dim = _dimension(figs, needs[label].keys) if label in needs else \
            next(f["dimension"] for f in figs if f["title"] == label)
        by_backend = {f["backend"]: f for f in figs if f["dimension"] == dim}
        for b, text in zip(backends, row[2:], strict=True):
            f = by_backend.get(b)
            if f is None:
                assert text == "—", (row[0], b, text)
                continue
            if f["letters"] is None:
                assert text.startswith("none (unranked)"), (row[0], b, text)
            else:
                number, cld = re.match(
                    r"([\d,.]+)(?: \[[\d,]+ of [\d,]+\])? \((†?[a-zA-Z]+)\)", text).groups()
                assert _shows(number, f["value"]), (row[0], b, text, f["value"])
                assert cld == f"{'' if f['networked'] else '†'}{f['letters']}", (row[0], b, text)
            assert ("⚠" in text) == ("too_few" in f["flags"]), (row[0], b, text)


def _shows(text: str, value: float) -> bool:
    """The report's number is the JSON's value to the digits it shows (the JSON keeps 6 significant digits,
    so 4.935 there is 4.94 in the report: one value, rounded once more for reading)."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text.replace(",", "")) - value) <= 0.5 * 10 ** -decimals * (1 + 1e-9)
