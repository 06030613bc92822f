"""What a system declares about itself, once, in its folder's `system.py` (`SYSTEM = System(...)`).

A system is one folder under authzbench/systems/: its adapter, its native recipe, its schema files and this
declaration. Nothing outside systems/ names a system: the loader (authzbench/systems/__init__.py) finds the
folders, and every table that used to be keyed by a backend's name is a field here.

References to code are "module:attribute" strings, imported only when used, so a missing driver disables
only its own system.
"""

from __future__ import annotations

from dataclasses import dataclass, field

REBAC = frozenset({"rebac"})
BOTH = frozenset({"rebac", "social"})

# What a model gives a user beyond the benchmark's checks: the table the report shows, marked as declared.
FEATURES = ("consistency tokens", "watch / change stream", "wildcards", "conditions",
            "schema change without a reload")


@dataclass(frozen=True)
class Claim:
    """One row of the features table: whether the system gives `feature`, and how (API or setting)."""

    feature: str  # one of FEATURES
    has: bool
    how: str = ""  # the API, setting or reason, one line
    test: str = ""  # the test that exercises it against the real server ("" = declared only)


@dataclass(frozen=True)
class Build:
    """A build step of the native recipe: `run` and `ready` are "module:function" strings."""

    what: str  # shown to the user, and the step's identity: a step several systems need runs once
    run: str
    ready: str
    expect: str = ""  # the duration the recipe announces ("5-25 min"; "" = none stated)


@dataclass(frozen=True)
class System:
    name: str  # the backend's name on the command line (--backend NAME)
    adapter: str  # "module:Class"; "" when there is no adapter yet (why_not_native says why)
    native: str = ""  # "module" of its native recipe; "" = none
    why_not_native: str = ""  # why it cannot run natively here ("" = it can)
    default: bool = True  # part of the default backend set
    models: frozenset[str] = REBAC
    drivers: tuple[str, ...] = ()  # pip distributions the adapter needs (pinned in pyproject's extra)
    extra: str = ""  # pip install 'authzbench[EXTRA]'
    in_process: bool = False  # runs inside the harness: no servers (the oracle)
    services: tuple[str, ...] = ()  # its compose services
    builds: tuple[Build, ...] = ()  # what its native recipe builds first, in order
    tiers: str = ""  # "module:function" tier -> EngineTier for a Zanzibar engine ("" = no tiers)
    artifacts: str = ""  # "module:function" -> the local image's files (--local-images)
    tools: str = ""  # "module:function" -> endpoint keys of tools the adapter runs beside its server
    colour: int = -1  # its slot in the charts' fixed palette (-1 = derived from the name)
    stand_in: str = ""  # what it stands in for ("" = the real thing)
    claims: tuple[Claim, ...] = field(default_factory=tuple)
