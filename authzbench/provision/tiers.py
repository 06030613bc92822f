"""The Zanzibar engines' two tiers (issue 47): how the engines are started so that their figures compare,
and the settings each deployment records for the report's servers table. What is shared is here; each
engine's flags are its recipe's `tier(name)` (systems/<name>/native.py), named by its declaration's `tiers`.

- cached (the default run): every engine's answer cache on, one freshness window (FRESHNESS_S), and the
  same datastore connection pool (POOL); reads in the mode each adapter chooses, which the report prints.
- strict: fully consistent reads (each adapter's fully_consistent mode) and every answer cache off.

Every flag of a recipe's tier() was checked against the built binary's `serve --help` / `run --help` or its
source (the version its recipe pins).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from authzbench.systems import load, system, systems

TIERS = ("cached", "strict")
DEFAULT_TIER = "cached"
# The engines' one freshness window: a revision quantization's default (5 s), cache TTLs set to match it.
FRESHNESS_S = 5
# Datastore connections per engine, the same for all: the most common default read pool among them. On this
# 2-core machine PostgreSQL runs ~2 queries at once, so 20 is already 10 per core: more only queues inside
# PostgreSQL instead of inside the engine.
POOL = 20
# Answer cache bound in bytes, stated instead of left to defaults, for the engines that bound theirs by bytes
# (each recipe's tier() says what its default would be).
CACHE_BYTES = "64MiB"


@dataclass(frozen=True)
class EngineTier:
    """An engine's command-line flags for a tier and the settings its deployment records."""

    flags: list[str]
    settings: dict[str, Any] = field(default_factory=dict)


def tier_of(options: dict[str, Any]) -> str:
    """The tier a StartContext's options ask for (cached when none)."""
    return str(options.get("tier") or DEFAULT_TIER)


def settings(tier: str, cache: str, freshness: str, freshness_s: float | None, pool: str,
             reads: str) -> dict[str, Any]:
    return {"tier": tier, "cache": cache, "cache_on": tier == "cached", "freshness": freshness,
            "freshness_s": freshness_s, "pool": pool, "pool_total": POOL, "reads": reads}


def engines() -> list[str]:
    """The backends that have tiers (their declaration names a recipe's tier function)."""
    return [name for name, s in systems().items() if s.tiers]


def engine_tier(name: str, tier: str) -> EngineTier:
    """`name`'s flags and recorded settings for `tier`."""
    return load(system(name).tiers)(tier)
