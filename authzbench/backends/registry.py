"""Backend name -> implementation, imported lazily so a missing driver disables only its backend."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from authzbench.errors import UserError


@dataclass(frozen=True)
class BackendEntry:
    name: str
    impl: str  # "module:Class"; "" when there is no adapter yet (why_not_native says why)
    native: str | None  # "module:function" starting its servers natively, None if impossible here
    compose_services: tuple[str, ...]  # services in compose/docker-compose.yaml
    why_not_native: str = ""  # shown by `--backend=list` when native is None
    default: bool = True  # part of the default backend set of `nox -s bench`


BACKENDS: dict[str, BackendEntry] = {
    e.name: e
    for e in [
        BackendEntry("reference", "authzbench.backends.reference:ReferenceBackend",
                     "authzbench.provision.native.inprocess:start", (), default=False),
        BackendEntry("postgres", "authzbench.backends.postgres:PostgresBackend",
                     "authzbench.provision.native.postgres:start", ("postgres",)),
        BackendEntry("spicedb-pg", "authzbench.backends.spicedb:SpiceDBBackend",
                     "authzbench.provision.native.spicedb:start", ("spicedb-pg",)),
        BackendEntry("openfga", "authzbench.backends.openfga:OpenFGABackend",
                     "authzbench.provision.native.openfga:start", ("openfga",), default=False),
        BackendEntry("spicedb-crdb", "authzbench.backends.spicedb:SpiceDBBackend", None, ("spicedb-crdb",),
                     why_not_native="no CockroachDB binary is obtainable here; use --provision compose|external",
                     default=False),
        # The hand-built CockroachDB model has no adapter: no CockroachDB server can be obtained on these
        # machines to test one against, and an adapter is only trusted once tested against the real server.
        BackendEntry("cockroach", "", None, ("cockroach",),
                     why_not_native="no adapter yet: no CockroachDB server is obtainable here to test one against "
                                    "(SpiceDB on CockroachDB is spicedb-crdb)", default=False),
        BackendEntry("scylla", "authzbench.backends.scylla:ScyllaBackend",
                     "authzbench.provision.native.cassandra:start", ("scylla",)),
        BackendEntry("clickhouse", "authzbench.backends.clickhouse:ClickHouseBackend",
                     "authzbench.provision.native.chdb:start", ("clickhouse",)),
        BackendEntry("elasticsearch", "authzbench.backends.elasticsearch:ElasticsearchBackend",
                     "authzbench.provision.native.elasticsearch:start", ("elasticsearch",)),
        BackendEntry("mongo", "authzbench.backends.mongo:MongoBackend",
                     "authzbench.provision.native.ferretdb:start", ("mongo",)),
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


def implementation(name: str) -> str:
    """The adapter's "module:Class", or one clear line when the backend has none yet."""
    e = entry(name)
    if not e.impl:
        raise UserError(f"{name}: {e.why_not_native}")
    return e.impl


def backend_class(name: str):
    return load_symbol(implementation(name))
