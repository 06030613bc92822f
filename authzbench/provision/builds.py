"""Builds before measuring: everything the selected backends' native recipes install or build, done first, one
step at a time, with progress and an estimate, so no Go or Maven build runs beside or between measured phases.

On a fresh machine the Go builds of the engines took ~12 min, interleaved with the measured phases of the
backends before them (issue 45: 35.6 min fresh against 25 warm). Every step is the recipe's own function
(idempotent: a cached build returns at once), so `start` later finds it done. The steps are each system's
declared `builds` (systems/<name>/system.py); a step several systems declare (the same `what`) runs once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from authzbench.core.console import console, say
from authzbench.systems import load, split, system
from authzbench.systems.contract import Build


@dataclass(frozen=True)
class BuildStep:
    what: str  # shown to the user, and the step's identity: a step several backends need runs once
    run: Callable[[], object]  # the recipe's build function
    expect: str  # the duration the recipe announces when it builds ("" = it states none)
    ready: Callable[[], bool]  # True when nothing is left to build (the recipe would return at once)
    recipe: str = ""  # the module that states `expect` (the step's run function's module)

    def minutes(self) -> float:
        """The expectation as a number for the estimate: the middle of a stated range ("5-25 min" -> 15)."""
        m = re.search(r"(\d+(?:\.\d+)?)(?:\s*-\s*(\d+(?:\.\d+)?))?\s*min", self.expect)
        if not m:
            return 0.0
        lo = float(m.group(1))
        return (lo + float(m.group(2))) / 2 if m.group(2) else lo


def _step(b: Build) -> BuildStep:
    """A declared build step, its functions imported when called (a recipe imports its driver)."""
    return BuildStep(
        b.what, lambda: load(b.run)(), b.expect, lambda: bool(load(b.ready)()), b.run.partition(":")[0])


def _version_step(b: Build, name: str) -> BuildStep:
    """NAME@VERSION's build of that release in place of the pinned one's step (its system's `versioned`)."""
    from authzbench.provision.gobuild import go_binary_ready

    version = split(name)[1]
    module = load(system(name).versioned)
    what = b.what.replace(" (", f" {version} (", 1)  # "spicedb v1.56.2 (go build)"
    return BuildStep(what, lambda: module(version).binary(), b.expect,
                     lambda: go_binary_ready(module(version)), b.run.partition(":")[0])


def steps_of(name: str) -> tuple[BuildStep, ...]:
    """What `name`'s native recipe builds first, in order (its declaration's `builds`; for NAME@VERSION the
    step marked per_version builds that version)."""
    return tuple(_version_step(b, name) if b.per_version and split(name)[1] else _step(b)
                 for b in system(name).builds)


def steps_for(backends: list[str], provision: str) -> list[BuildStep]:
    """The build steps of these backends, in their order, each once; none unless they run natively (an
    in-process engine, the reference, has none)."""
    if provision != "native":
        return []
    out: dict[str, BuildStep] = {}
    for name in backends:
        for step in steps_of(name):
            out.setdefault(step.what, step)
    return list(out.values())


def pending_builds(backends: list[str], provision: str) -> list[BuildStep]:
    """The steps not done yet on this machine."""
    return [s for s in steps_for(backends, provision) if not s.ready()]


def build_all(
    todo: list[BuildStep], backends: list[str], on_fail: Callable[[str, Exception], None]) -> set[str]:
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
        needing = {n for n in backends if step.what in {s.what for s in steps_of(n)}}
        for name in needing:
            on_fail(name, e)
        return needing
    say(f"built {step.what} in {time.monotonic() - t0:.0f} s"
        + (f" (expected {step.expect})" if step.expect else ""))
    return set()
