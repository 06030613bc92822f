"""The Permify load-test reproduction in the document's own results layout (k6's summary), one row per engine
and variant, beside the published row. Every figure is computed from the recorded histograms and counters
(`workloads/loadtest.py`); the published row is quoted from SCALE-REFERENCE.md part B.
"""

from __future__ import annotations

from pathlib import Path

from authzbench.core.errors import UserError
from authzbench.core.metrics import decode, percentile
from authzbench.core.records import Loadtest
from authzbench.report.core.published import load_published
from authzbench.results.store import RunStore

HEADER = (
    "| engine | variant | avg (ms) | min (ms) | med (ms) | max (ms) | p(90) (ms) | p(95) (ms) | requests/s "
    "achieved | iterations | dropped iterations | checks passed (no error) | answers = oracle | allowed | "
    "p(95) from intended start (ms) |")


def _ms(h, q: float | None = None) -> float:
    return (h.get_mean_value() if q is None else percentile(h, q)) / 1000.0


def row(rec: Loadtest) -> str:
    """One engine's figures: request duration from send, throughput, drops, checks."""
    h, hi = decode(rec.duration_hist), decode(rec.from_intended_hist)
    n, ok = rec.iterations, rec.iterations - rec.errors
    pct = 100.0 * ok / n if n else float("nan")
    answered_right = ok - rec.mismatches
    return (
        f"| {rec.label} | {rec.variant} | {_ms(h):.2f} | {h.get_min_value() / 1000:.2f} | "
        f"{_ms(h, 50):.2f} | {h.get_max_value() / 1000:.2f} | {_ms(h, 90):.2f} | {_ms(h, 95):.2f} | "
        f"{n / rec.wall_s:,.1f} | {n:,} | {rec.dropped:,} | {pct:.2f}% ({ok:,} out of {n:,}) | "
        f"{answered_right:,} of {ok:,} | {100.0 * rec.allowed / max(ok, 1):.1f}% | {_ms(hi, 95):.2f} |")


def published_row() -> str:
    """The published run (SCALE-REFERENCE.md part B, in published_figures.json): its summary, verbatim."""
    p = load_published()["loadtest"]["summary"]
    return (
        f"| {p['engine']} | published | {p['avg']:.2f} | {p['min']:.2f} | {p['med']:.2f} | {p['max']:.2f} "
        f"| {p['p90']:.2f} | {p['p95']:.2f} | {p['rps']:,.1f} | {p['iterations']:,} | {p['dropped']:,} "
        f"| {p['checks']} | {p['answers']} | {p['allowed']} | {p['p95_intended']} |")


def render(records: list[Loadtest], context: list[str]) -> str:
    """The markdown section: the layout of the document's table, then what each variant caps."""
    lines = [
        f"## The {load_published()['loadtest']['engine']} load test, reproduced", "", *context, "", HEADER,
        "|" + "---|" * HEADER.count(" | ") + "---|", published_row()]
    lines += [row(r) for r in records]
    busy = {(r.label, r.variant): r.max_busy_vus for r in records}
    lines += [
        "", "Most VUs busy at once: " + ", ".join(f"{k[0]} {k[1]} {v:,}" for k, v in busy.items()) + "."]
    return "\n".join(lines) + "\n"


def write(records: list[Loadtest], context: list[str], out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    engine = load_published()["loadtest"]["engine"]
    out.write_text(f"# {engine} load test (k6 scenario) on identical data\n\n" + render(records, context))
    return out


def render_run(run: Path, out_dir: Path) -> Path:
    """loadtest-<run-id>.md from a load test's results alone: its `loadtest` records and the context lines its
    manifest keeps (`loadtest_context`), so the command and a committed example (tools/examples.py) write
    the same bytes from the same results."""
    store = RunStore.open(run)
    context = store.manifest().get("loadtest_context")
    if not context:
        raise UserError(
            f"{run}: no loadtest_context in its manifest (not a load test, or one recorded before "
            "the context was kept)")
    records = [r for r in store.typed() if isinstance(r, Loadtest)]
    return write(records, context, out_dir / f"loadtest-{run.name}.md")
