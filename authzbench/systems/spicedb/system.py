"""SpiceDB (gRPC), on PostgreSQL natively (spicedb-pg) and on CockroachDB under compose (spicedb-crdb)."""

from authzbench.systems.contract import BOTH, POSTGRES_SERVER, Build, Claim, System

DRIVERS = ("authzed", "grpcio", "psycopg")
GO = Build("spicedb (go build)", "authzbench.systems.spicedb.native:binary",
           "authzbench.systems.spicedb.native:built", "5-25 min", per_version=True)
# The upstream reports of fresh-mode reads missing a committed write: the three tools/newenemy_repro.py's
# docstring names for SpiceDB on PostgreSQL; that tool speaks SpiceDB's API, so it reproduces them.
STALE = dict(stale_reports=("https://github.com/authzed/spicedb/issues/1215",
                            "https://github.com/authzed/spicedb/issues/1130",
                            "https://github.com/authzed/spicedb/issues/3260"), stale_reproduced=True)
IMAGE = dict(image="spicedb", image_files="authzbench.systems.spicedb.native:image_files",
             image_versions="authzbench.systems.spicedb.native:image_versions")

SPICEDB_CLAIMS = (
    Claim("consistency tokens", True,
          "ZedTokens: a write returns one, a read at_least_as_fresh of it sees the write",
          "tests/backends/test_spicedb.py::test_write_is_visible_at_least_as_fresh_as_its_token"),
    Claim("watch / change stream", True, "the Watch API streams relationship changes"),
    Claim("wildcards", True, "a subject type user:* in the schema grants every user"),
    Claim("conditions", True, "caveats: CEL expressions evaluated with the request's context"),
    Claim("schema change without a reload", True, "WriteSchema replaces the schema of a running server"),
)

SYSTEMS = (
    System(name="spicedb-pg", claims=SPICEDB_CLAIMS,
           adapter="authzbench.systems.spicedb.adapter:SpiceDBBackend",
           native="authzbench.systems.spicedb.native", models=BOTH, drivers=DRIVERS, extra="spicedb",
           services=("spicedb-pg",), builds=(POSTGRES_SERVER, GO),
           tiers="authzbench.systems.spicedb.native:tier", crosscheck="authzbench.systems.spicedb.crosscheck",
           readers="authzbench.systems.spicedb.export:READERS",
           loadtest=2, colour=1, order=2, aliases=("SpiceDB",),
           cpu_counts="SpiceDB and its PostgreSQL together",
           versioned="authzbench.systems.spicedb.native:go_module", **STALE, **IMAGE),
    System(name="spicedb-crdb", claims=SPICEDB_CLAIMS,
           adapter="authzbench.systems.spicedb.adapter:SpiceDBBackend",
           why_not_native="no CockroachDB binary is obtainable here; use --provision compose|external",
           default=False, models=BOTH, drivers=DRIVERS, extra="spicedb", services=("spicedb-crdb",), colour=8,
           order=5, aliases=("SpiceDB",), **STALE, **IMAGE),
)
