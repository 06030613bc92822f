"""Backend name -> adapter, imported lazily so a missing driver disables only its backend.

Each entry is what the harness needs to know about a backend's adapter without importing it: its class,
the models it implements, its driver distributions and the pip extra that installs them (pyproject.toml's
optional-dependencies; a unit test keeps the two and results.DRIVERS in agreement). How its servers are
started is provisioning's (provision/manager.NATIVE, provision/compose.SERVICES); authzbench/run/stack.py joins
the two, and neither package imports the other. docs/ADDING-A-BACKEND.md walks through a new backend.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import metadata

from authzbench.core.errors import BackendUnavailable, UserError

REBAC = frozenset({"rebac"})
BOTH = frozenset({"rebac", "social"})


@dataclass(frozen=True)
class BackendEntry:
    name: str
    impl: str  # "module:Class"; "" when there is no adapter yet (why_not_native says why)
    # Why it cannot run natively here ("" = it can: provision/manager.NATIVE has its recipe; a unit test keeps
    # the two in agreement), or why it has no adapter; shown by `--backend=list`.
    why_not_native: str = ""
    default: bool = True  # part of the default backend set of `nox -s bench`
    models: frozenset[str] = REBAC  # authorization models the adapter implements
    drivers: tuple[str, ...] = ()  # pip distributions the adapter needs (pinned in pyproject's extra)
    extra: str = ""  # the pyproject extra installing the drivers: pip install 'authzbench[EXTRA]'
    in_process: bool = False  # runs inside the harness: no servers, no saved server state (the oracle)


BACKENDS: dict[str, BackendEntry] = {
    e.name: e
    for e in [
        BackendEntry("reference", "authzbench.systems.reference.adapter:ReferenceBackend", default=False, models=BOTH,
                     in_process=True),
        BackendEntry("postgres", "authzbench.systems.postgres.adapter:PostgresBackend", models=BOTH,
                     drivers=("psycopg",), extra="postgres"),
        BackendEntry("spicedb-pg", "authzbench.systems.spicedb.adapter:SpiceDBBackend", models=BOTH,
                     drivers=("authzed", "grpcio", "psycopg"), extra="spicedb"),
        BackendEntry("openfga", "authzbench.systems.openfga.adapter:OpenFGABackend", models=BOTH,
                     drivers=("openfga-sdk", "psycopg"), extra="openfga"),
        # permify (the PyPI package): the REST clients authzbench.systems.permify.clients compares with the adapter's gRPC.
        BackendEntry("permify", "authzbench.systems.permify.adapter:PermifyBackend", models=BOTH,
                     drivers=("permify", "grpcio", "grpcio-reflection", "psycopg"), extra="permify"),
        BackendEntry("spicedb-crdb", "authzbench.systems.spicedb.adapter:SpiceDBBackend",
                     why_not_native="no CockroachDB binary is obtainable here; use --provision compose|external",
                     default=False, models=BOTH, drivers=("authzed", "grpcio", "psycopg"), extra="spicedb"),
        # The hand-built CockroachDB model has no adapter: no CockroachDB server can be obtained on these
        # machines to test one against, and an adapter is only trusted once tested against the real server.
        BackendEntry("cockroach", "",
                     why_not_native="no adapter yet: no CockroachDB server is obtainable here to test one against "
                                    "(SpiceDB on CockroachDB is spicedb-crdb)", default=False),
        BackendEntry("scylla", "authzbench.systems.scylla.adapter:ScyllaBackend",
                     drivers=("cassandra-driver",), extra="scylla"),
        BackendEntry("clickhouse", "authzbench.systems.clickhouse.adapter:ClickHouseBackend",
                     drivers=("clickhouse-connect", "chdb"), extra="clickhouse"),
        BackendEntry("elasticsearch", "authzbench.systems.elasticsearch.adapter:ElasticsearchBackend",
                     drivers=("elasticsearch",), extra="elasticsearch"),
        BackendEntry("mongo", "authzbench.systems.mongo.adapter:MongoBackend",
                     drivers=("pymongo", "psycopg"), extra="mongo"),
    ]
}


def entry(name: str) -> BackendEntry:
    try:
        return BACKENDS[name]
    except KeyError:
        raise UserError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}") from None


def load_symbol(path: str):
    module, _, attr = path.partition(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise UserError(f"{path}: cannot import {e.name!r} ({e}); is the project installed with its extras?") from e
    return getattr(mod, attr)


def missing_driver(name: str) -> str | None:
    """One line naming the extra to install when a driver of `name` is not installed, else None."""
    e = entry(name)
    for dist in e.drivers:
        try:
            metadata.version(dist)
        except metadata.PackageNotFoundError:
            return f"driver {dist} is not installed: pip install 'authzbench[{e.extra or name}]'"
    return None


def implementation(name: str) -> str:
    """The adapter's "module:Class", or one clear line when the backend has none yet or lacks its driver."""
    e = entry(name)
    if not e.impl:
        raise UserError(f"{name}: {e.why_not_native}")
    if (why := missing_driver(name)) is not None:
        raise BackendUnavailable(why)
    return e.impl


def backend_class(name: str):
    return load_symbol(implementation(name))


def extras() -> dict[str, set[str]]:
    """pip extra -> the driver distributions it must install (what pyproject.toml declares)."""
    out: dict[str, set[str]] = {}
    for e in BACKENDS.values():
        if e.extra:
            out.setdefault(e.extra, set()).update(e.drivers)
    return out
