"""Builds before measuring: everything the selected backends' native recipes install or build, done first, one
step at a time, with progress and an estimate, so no Go or Maven build runs beside or between measured phases.

On a fresh machine the Go builds of SpiceDB, OpenFGA, Permify and FerretDB took ~12 min, interleaved with the
measured phases of the backends before them (issue 45: 35.6 min fresh against 25 warm). Every step is the
recipe's own function (idempotent: a cached build returns at once), so `start` later finds it done.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from authzbench.core.console import console, say
from authzbench.provision.base import cache_dir, stamp_ok


@dataclass(frozen=True)
class BuildStep:
    what: str  # shown to the user, and the step's identity: a step several backends need runs once
    run: Callable[[], object]  # the recipe's build function
    expect: str  # the duration the recipe announces when it builds ("" = it states none)
    ready: Callable[[], bool]  # True when nothing is left to build (the recipe would return at once)
    recipe: str = ""  # the native recipe module that states `expect` (provision/native/<recipe>.py)

    def minutes(self) -> float:
        """The expectation as a number for the estimate: the middle of a stated range ("5-25 min" -> 15)."""
        m = re.search(r"(\d+(?:\.\d+)?)(?:\s*-\s*(\d+(?:\.\d+)?))?\s*min", self.expect)
        if not m:
            return 0.0
        lo = float(m.group(1))
        return (lo + float(m.group(2))) / 2 if m.group(2) else lo


def _native(module: str, attr: str) -> Callable[[], object]:
    """A recipe's function, imported when called (a recipe imports its driver)."""
    return lambda: getattr(importlib.import_module(f"authzbench.provision.native.{module}"), attr)()


def _go_ready(module: str) -> Callable[[], bool]:
    def ready() -> bool:
        from authzbench.provision.gobuild import go_binary_ready

        return go_binary_ready(importlib.import_module(f"authzbench.provision.native.{module}").GO)

    return ready


def _go(module: str, expect: str) -> BuildStep:
    return BuildStep(f"{module} (go build)", _native(module, "binary"), expect, _go_ready(module), module)


def _es_ready() -> bool:
    from authzbench.provision.native import elasticsearch as es

    return stamp_ok(cache_dir() / f"elasticsearch-{es.ES_VERSION}" / "build.stamp", es._build_id())


def _cassandra_ready() -> bool:
    import hashlib

    from authzbench.provision.native import cassandra as c

    # the two stamps cassandra.jars() and cassandra.bulk_tool() check
    bulk = f"{c.CASSANDRA_VERSION} {hashlib.sha256(c.BULK_SRC.read_bytes()).hexdigest()[:16]}"
    return (stamp_ok(cache_dir() / f"cassandra-{c.CASSANDRA_VERSION}" / "jars.stamp", c.CASSANDRA_VERSION)
            and stamp_ok(cache_dir() / f"cassandra-bulk-{c.CASSANDRA_VERSION}" / "build.stamp", bulk))


def _postgres_ready() -> bool:
    return any(Path("/usr/lib/postgresql").glob("*/bin/postgres"))


# The expectations are the ones each recipe announces when it builds (its `expect=` or its say line);
# tests/unit/test_builds.py keeps them equal to the recipes' text.
POSTGRES = BuildStep("PostgreSQL server (apt)", _native("postgres", "bin_dir"), "", _postgres_ready)
STEPS: dict[str, tuple[BuildStep, ...]] = {
    "postgres": (POSTGRES,),
    "spicedb-pg": (POSTGRES, _go("spicedb", "5-25 min")),
    "openfga": (POSTGRES, _go("openfga", "~6.5 min")),
    "permify": (POSTGRES, _go("permify", "~3.5 min")),
    "mongo": (POSTGRES, _go("ferretdb", "~3-6 min")),
    "elasticsearch": (BuildStep("elasticsearch node launcher (mvn package)", _native("elasticsearch", "node_build"),
                                "~1 min", _es_ready, "elasticsearch"),),
    # jars() (~67 MB from Maven Central) states no duration; bulk_tool() fetches them first, then ~10 s of javac
    "scylla": (BuildStep("cassandra jars and bulk helper (mvn, javac)", _native("cassandra", "bulk_tool"), "",
                         _cassandra_ready),),
}


def steps_for(backends: list[str], provision: str) -> list[BuildStep]:
    """The build steps of these backends, in their order, each once; none unless they run natively (an
    in-process engine, the reference, has none)."""
    if provision != "native":
        return []
    out: dict[str, BuildStep] = {}
    for name in backends:
        for step in STEPS.get(name, ()):
            out.setdefault(step.what, step)
    return list(out.values())


def pending_builds(backends: list[str], provision: str) -> list[BuildStep]:
    """The steps not done yet on this machine."""
    return [s for s in steps_for(backends, provision) if not s.ready()]


def build_all(todo: list[BuildStep], backends: list[str], on_fail: Callable[[str, Exception], None]) -> set[str]:
    """Run the pending steps one after the other, before any server starts. A failed step fails the backends
    that need it (on_fail is called inside the except, once per backend); returns their names."""
    total_min = sum(s.minutes() for s in todo)
    say(f"building before measuring: {len(todo)} step(s), est {total_min:.0f} min from the recipes' figures")
    failed: set[str] = set()
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console,
                  transient=True) as prog:
        task = prog.add_task("", total=len(todo))
        for i, step in enumerate(todo):
            left = sum(s.minutes() for s in todo[i:])
            prog.update(task, description=f"building {i + 1}/{len(todo)}: {step.what}"
                        + (f" ... est {step.expect}, ~{left:.0f} min of builds left" if step.expect else ""))
            failed |= _run_step(step, backends, on_fail)
            prog.advance(task)
    return failed


def _run_step(step: BuildStep, backends: list[str], on_fail: Callable[[str, Exception], None]) -> set[str]:
    t0 = time.monotonic()
    try:
        step.run()
    except Exception as e:  # noqa: BLE001 - a failed build fails its backends, not the run
        needing = {n for n in backends if step in STEPS.get(n, ())}
        for name in needing:
            on_fail(name, e)
        return needing
    say(f"built {step.what} in {time.monotonic() - t0:.0f} s" + (f" (expected {step.expect})" if step.expect else ""))
    return set()
