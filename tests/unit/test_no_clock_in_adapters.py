"""No adapter reads a clock: the run layer times every load, build and op (run/loading.py, measure/timing.py).
Every module of backends/ and of each system folder (systems/<name>/, its native recipe apart: starting a
server may wait on a clock) is read with ast; a call of a clock (time.time, perf_counter, monotonic,
process_time, datetime.now...) or an import of one from `time` is a clock read, named by module and function.
The few kept are not timing, each with its reason; a test fails when one is no longer in the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import authzbench

ROOT = Path(authzbench.__file__).parent
CLOCKS = {"time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time",
          "process_time_ns", "thread_time", "thread_time_ns", "clock_gettime", "clock_gettime_ns"}
DATE_CLOCKS = {"now", "utcnow", "today"}

# Clock reads that time nothing, by the function that holds them (its module may move: the name stays).
KEPT: dict[str, str] = {
    "Watchdog.arm": "backends/deadline.py: a client-side deadline for drivers without one (the op's limit)",
    "Watchdog._run": "backends/deadline.py: the watchdog thread waits until the armed deadline",
    "spin_lock": "backends/locks.py: how long a structural writer waits for the lock before giving up",
    "MongoBackend.group_lock.take": "the lock document's wall-clock stamp, so a dead holder's lock expires",
    "ElasticsearchBackend.group_lock.take": "the lock document's wall-clock stamp, so a dead holder's lock "
                                            "expires",
    "OpenFGABackend.lookup_resources": "an answer that took the server's ListObjects deadline may be cut "
                                       "short: "
    "refused, not timed",
}


def adapter_modules() -> list[Path]:
    # a folder's tools/ are experiments of the command layer, which time what they compare
    systems = [p for p in ROOT.glob("systems/*/**/*.py") if p.name != "native.py" and "tools" not in p.parts]
    return sorted([*ROOT.glob("backends/*.py"), *systems])


def _is_clock(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        return (f.value.id == "time" and f.attr in CLOCKS) or (f.value.id in ("datetime", "date")
                                                               and f.attr in DATE_CLOCKS)
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute):  # datetime.datetime.now()
        return f.value.attr in ("datetime", "date") and f.attr in DATE_CLOCKS
    return False


def clock_reads(source: str) -> list[str]:
    """The functions (qualified: Class.method.inner) of `source` that read a clock, once per read;
    "<module>" for one outside any function or an import of a clock from `time`."""
    found: list[str] = []

    def walk(node: ast.AST, where: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                walk(child, [*where, child.name])
                continue
            if isinstance(child, ast.Call) and _is_clock(child):
                found.append(".".join(where) or "<module>")
            if isinstance(child, ast.ImportFrom) and child.module == "time" and \
                    {a.name for a in child.names} & CLOCKS:
                found.append("<module>")
            walk(child, where)

    walk(ast.parse(source), [])
    return found


def reads_by_module() -> dict[str, list[str]]:
    out = {}
    for p in adapter_modules():
        reads = clock_reads(p.read_text())
        if reads:
            out[str(p.relative_to(ROOT))] = reads
    return out


def test_no_adapter_module_reads_a_clock_but_where_it_times_nothing():
    timing = {m: [f for f in fs if f not in KEPT] for m, fs in reads_by_module().items()}
    assert {m: fs for m, fs in timing.items() if fs} == {}


def test_every_kept_clock_read_is_still_in_the_code():
    held = {f for fs in reads_by_module().values() for f in fs}
    assert sorted(set(KEPT) - held) == []


def test_the_scan_covers_every_adapter_module():
    # every module defining a Backend subclass (the adapters and their load mixins' classes beside them)
    adapters = {p for p in ROOT.rglob("*.py") if re.search(r"^class \w+\(.*\bBackend\)", p.read_text(), re.M)}
    assert len(adapters) >= 8 and sorted(str(p) for p in adapters - set(adapter_modules())) == []


def test_the_scan_finds_every_kind_of_clock_read_by_function():
    source = """
import time
from time import perf_counter
import datetime

class B:
    def load(self):
        t0 = time.perf_counter()
        def send():
            return time.monotonic_ns()
        return datetime.datetime.now(), time.sleep(0)

def at_import():
    return datetime.now()
"""
    assert clock_reads(source) == ["<module>", "B.load", "B.load.send", "B.load", "at_import"]
