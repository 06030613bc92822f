"""`decide`'s options: the reader's target, stated once, every default named (cli.py registers the
subcommand and lends its argparse types)."""

from __future__ import annotations

import argparse
from pathlib import Path

from authzbench.decide import parse
from authzbench.decide.needs import DEFAULT_MAX_CORES
from authzbench.decide.plan import DEFAULT_BUDGET_MIN


def add_arguments(d: argparse.ArgumentParser, _amount, _number, _csv, _name, _path) -> None:
    """The options, with cli.py's argparse types (a k/M/G amount, a bounded number, a comma list, a name, a
    path) so that a bad value reads as every other command's."""
    d.add_argument("--relationships", type=_amount, required=True, help="target size (k/M/G suffixes)")
    d.add_argument("--checks", type=_amount, required=True, help="peak checks/s")
    d.add_argument("--changes", type=_number(float, 0), required=True,
                   help="structural changes/s (0: not a need), in --change-mix's shares")
    d.add_argument("--change-mix", type=parse.mix, metavar="membership=S,hierarchy=S",
                   help="shares of the changes, summing to 1 (default membership=1)")
    d.add_argument("--lookups", type=_number(float, 0), default=0.0, help="reverse lookups/s (default 0)")
    d.add_argument("--freshness", type=parse.freshness, default=("any", None),
                   metavar="any|bounded:SECONDS|no-stale", help="how stale a check may be (default any)")
    d.add_argument("--check-p95-ms", type=_number(float, 0, above=True), default=25.0,
                   help="check SLO, p95 ms (default 25)")
    d.add_argument("--budget", type=_number(float, 0, above=True), default=DEFAULT_BUDGET_MIN,
                   metavar="MINUTES", help=f"bound of the whole run (default {DEFAULT_BUDGET_MIN:g}: about "
                   "an hour on a 2-core machine; the largest size is dropped first)")
    d.add_argument("--max-cores", type=_number(int, 1), default=DEFAULT_MAX_CORES,
                   help=f"cores the target may use: the throughput need (default {DEFAULT_MAX_CORES}, 3 "
                        "machines of 8)")
    d.add_argument("--backend", action="append", metavar="NAME", type=_csv(_name),
                   help="backends (default: the default set)")
    d.add_argument("--provision", choices=["native", "compose", "external"])
    d.add_argument("--max-load-minutes", type=_number(float, 0, above=True), default=30.0,
                   help="a load past this stops; a size whose planned load passes it is not planned (30)")
    d.add_argument("--iterations-scale", type=_number(float, 0, above=True), default=1.0,
                   help="multiply every stage's phase budgets (default 1)")
    d.add_argument("--plan-only", action="store_true", help="print the plan and its ETA, measure nothing")
    d.add_argument("--data-dir", type=_path)
    d.add_argument("--results-dir", type=_path, help="default ./results or $AUTHZBENCH_RESULTS")
    d.add_argument("--report-dir", type=_path, default=Path("reports"),
                   help="where the decision report is written (default: ./reports)")
