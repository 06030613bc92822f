"""The Zanzibar engines' two tiers (issue 47): how SpiceDB, OpenFGA and Permify are started so that their
figures compare, and the settings each deployment records for the report's servers table.

- cached (the default run): every engine's answer cache on, one freshness window (FRESHNESS_S), and the
  same datastore connection pool (POOL); reads in the mode each adapter chooses (SpiceDB and OpenFGA
  minimize_latency, Permify at_least_as_fresh: its last write's snap token), which the report prints.
- strict: fully consistent reads (the adapters' fully_consistent: SpiceDB fully_consistent, OpenFGA
  HIGHER_CONSISTENCY, Permify no snap token = its head snapshot) and every answer cache off.

Every flag below was checked against the built binary's `serve --help` / `run --help` (SpiceDB v1.56.2,
OpenFGA v1.22.1) or Permify v1.7.3's pkg/cmd/serve.go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TIERS = ("cached", "strict")
DEFAULT_TIER = "cached"
# SpiceDB's default revision quantization (5 s); OpenFGA's cache TTLs (10 s by default) set to match it.
FRESHNESS_S = 5
# Datastore connections per engine, the same for all three: SpiceDB's and Permify's default read pool
# (OpenFGA's default is 30). On this 2-core machine PostgreSQL runs ~2 queries at once, so 20 is
# already 10 per core: more only queues inside PostgreSQL instead of inside the engine.
POOL = 20
# SpiceDB splits its pool: the reads the report measures get 16, writes (1% of mixed ops, the write
# scenarios) 4, 20 in all like the others' single pool.
SPICEDB_READ_POOL, SPICEDB_WRITE_POOL = 16, 4
# Answer cache bounds, stated instead of left to defaults: 64 MiB for SpiceDB's dispatch cache (its default
# is 30% of the machine's memory) and Permify's check cache (default 10 MiB); OpenFGA bounds entries, not
# bytes: 10,000 (its default check cache limit).
CACHE_BYTES = "64MiB"
PERMIFY_COUNTERS = 100_000  # Ristretto's advice: ~10x the entries kept; Permify's default is 10,000
OPENFGA_CACHE_ENTRIES = 10_000
# Permify's check cache cannot be switched off: a 1-byte bound makes Ristretto refuse every entry (an entry
# costs its key's length, > 1), so nothing is ever served from it.
PERMIFY_NO_CACHE = "1B"


@dataclass(frozen=True)
class EngineTier:
    """An engine's command-line flags for a tier and the settings its deployment records."""

    flags: list[str]
    settings: dict[str, Any] = field(default_factory=dict)


def tier_of(options: dict[str, Any]) -> str:
    """The tier a StartContext's options ask for (cached when none)."""
    return str(options.get("tier") or DEFAULT_TIER)


def _settings(tier: str, cache: str, freshness: str, freshness_s: float | None, pool: str,
              reads: str) -> dict[str, Any]:
    return {"tier": tier, "cache": cache, "cache_on": tier == "cached", "freshness": freshness,
            "freshness_s": freshness_s, "pool": pool, "pool_total": POOL, "reads": reads}


def spicedb(tier: str) -> EngineTier:
    pool = [f"--datastore-conn-pool-read-max-open={SPICEDB_READ_POOL}",
            f"--datastore-conn-pool-read-min-open={SPICEDB_READ_POOL}",
            f"--datastore-conn-pool-write-max-open={SPICEDB_WRITE_POOL}",
            f"--datastore-conn-pool-write-min-open={SPICEDB_WRITE_POOL}"]
    pool_text = f"read {SPICEDB_READ_POOL} + write {SPICEDB_WRITE_POOL} connections"
    # Max staleness 0: without it SpiceDB may pick a revision up to 10% older than the window (5.5 s).
    window = [f"--datastore-revision-quantization-interval={FRESHNESS_S}s",
              "--datastore-revision-quantization-max-staleness-percent=0"]
    if tier == "strict":
        return EngineTier([*pool, *window, "--dispatch-cache-enabled=false"],
                          _settings(tier, "off (dispatch cache disabled)", "none (fully_consistent reads: the "
                                    "head revision)", 0, pool_text, "fully_consistent"))
    return EngineTier([*pool, *window, "--dispatch-cache-enabled=true", f"--dispatch-cache-max-cost={CACHE_BYTES}"],
                      _settings(tier, f"dispatch cache, {CACHE_BYTES}", f"{FRESHNESS_S} s (revision quantization)",
                                FRESHNESS_S, pool_text, "minimize_latency"))


def openfga(tier: str) -> EngineTier:
    pool = [f"--datastore-max-open-conns={POOL}", f"--datastore-min-open-conns={POOL}",
            f"--datastore-max-idle-conns={POOL}", f"--datastore-min-idle-conns={POOL}"]
    pool_text = f"{POOL} connections"
    if tier == "strict":
        off = ["--check-query-cache-enabled=false", "--check-iterator-cache-enabled=false",
               "--list-objects-iterator-cache-enabled=false"]
        return EngineTier([*pool, *off], _settings(tier, "off (check query and iterator caches)",
                                                   "none (HIGHER_CONSISTENCY reads)", 0, pool_text,
                                                   "HIGHER_CONSISTENCY"))
    ttl = f"{FRESHNESS_S}s"
    # The cache controller would drop entries older than the store's last write; off, the TTL alone bounds
    # staleness, as SpiceDB's quantization window does.
    on = ["--check-query-cache-enabled=true", f"--check-query-cache-ttl={ttl}",
          f"--check-cache-limit={OPENFGA_CACHE_ENTRIES}", "--check-iterator-cache-enabled=true",
          f"--check-iterator-cache-ttl={ttl}", "--list-objects-iterator-cache-enabled=true",
          f"--list-objects-iterator-cache-ttl={ttl}", "--cache-controller-enabled=false"]
    return EngineTier([*pool, *on], _settings(tier, f"check query + iterator caches, {OPENFGA_CACHE_ENTRIES:,} "
                                              "entries", f"{FRESHNESS_S} s (cache TTL)", FRESHNESS_S, pool_text,
                                              "MINIMIZE_LATENCY"))


def permify(tier: str) -> EngineTier:
    pool = [f"--database-max-connections={POOL}", f"--database-min-connections={POOL}"]
    pool_text = f"{POOL} connections"
    if tier == "strict":
        return EngineTier([*pool, f"--service-permission-cache-max-cost={PERMIFY_NO_CACHE}"],
                          _settings(tier, "off (check cache bounded to 1 byte: holds nothing)",
                                    "none (no snap token: the head snapshot)", 0, pool_text, "fully_consistent"))
    # Permify keys its cache by snapshot: an answer is never older than the snapshot the request reads
    # (the client's last write token, else the head), so it has no time window to set.
    return EngineTier([*pool, f"--service-permission-cache-max-cost={CACHE_BYTES}",
                       f"--service-permission-cache-number-of-counters={PERMIFY_COUNTERS}"],
                      _settings(tier, f"check cache (Ristretto), {CACHE_BYTES}", "no time window: snapshot-keyed "
                                "(reads at the client's last write token, else the head)", None, pool_text,
                                "at_least_as_fresh"))


ENGINES = {"spicedb-pg": spicedb, "openfga": openfga, "permify": permify}
