"""Round-to-round spread against window length, from one run with long rounds: each round's first w seconds
(its first w interval flushes a worker, `PhaseSpec.interval_s` = 1 s) merged, for w = 1, 2, 4. The spread of a
figure is its highest round over its lowest. How the default round window was chosen (cli.py --rounds):

    python -m authzbench.tools.window_spread docs/basis/window-study-20261128-041734/records.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from pathlib import Path

from authzbench.core.metrics import merge, summarize

WINDOWS_S = (1, 2, 4)


def rounds_by_key(path: Path) -> dict[tuple[str, str, str], dict[str, list[dict]]]:
    """(backend, scenario, workers) -> round -> the round's check and lookup intervals."""
    opener = gzip.open if path.suffix == ".gz" else open
    out: dict = defaultdict(lambda: defaultdict(list))
    with opener(path, "rt") as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "interval" and r["kind"] in ("check", "lookup"):
                backend, scenario, workers, rnd = r["phase"].split("/")[:4]
                out[(backend, scenario, workers)][rnd].append(r)
    return out


def first_seconds(intervals: list[dict], w: int) -> tuple[float, float, int]:
    """p50 and p95 (ms) and ops of a round's first w interval flushes of each worker."""
    per: dict[int, list[dict]] = defaultdict(list)
    for r in sorted(intervals, key=lambda r: r["ts"]):
        per[r["worker"]].append(r)
    take = [r for flushes in per.values() for r in flushes[:w]]
    s = summarize(merge(r["hist"] for r in take))
    return s.p50_ms, s.p95_ms, sum(r["ops"] for r in take)


def spread_rows(path: Path) -> list[list]:
    rows = []
    for key, rounds in sorted(rounds_by_key(path).items()):
        for w in WINDOWS_S:
            got = [first_seconds(ivs, w) for ivs in rounds.values()]
            p50, p95, ops = zip(*got, strict=True)
            rows.append([*key, w, len(got), max(p50) / min(p50), max(p95) / min(p95),
                         max(ops) / max(1, min(ops)), round(sum(ops) / len(ops))])
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("records", type=Path)
    args = p.parse_args(argv)
    print("| Backend | Scenario | Workers | Window (s) | Rounds | p50 max/min | p95 max/min | ops max/min | "
          "ops a round |")
    print("|---|---|---|---|---|---|---|---|---|")
    for b, s, c, w, n, p50, p95, ops, mean in spread_rows(args.records):
        print(f"| {b} | {s} | {c} | {w} | {n} | {p50:.2f} | {p95:.2f} | {ops:.2f} | {mean:,} |")


if __name__ == "__main__":
    main()
