"""What a system declares about itself, once, in its folder's `system.py` (`SYSTEM = System(...)`).

A system is one folder under authzbench/systems/: its adapter, its native recipe, its schema files and this
declaration. Nothing outside systems/ names a system: the loader (authzbench/systems/__init__.py) finds the
folders, and every table that used to be keyed by a backend's name is a field here.

The folder, authzbench/systems/<name>/ (the folder name is the system's; its backends may be named otherwise):

    __init__.py   empty
    system.py     the declaration: `SYSTEM = System(...)`, or `SYSTEMS = (System(...), ...)` for a folder
                  serving several backends (spicedb: spicedb-pg and spicedb-crdb). It imports this module
                  only, so the loader reads every declaration without importing a driver.
    adapter.py    the Backend subclass (authzbench/backends/base.py), named by `adapter="...adapter:Class"`.
    <part>.py     the adapter's parts, short names beside it (scylla/cql.py, permify/grpc.py, mongo/load.py).
                  The adapter side may import authzbench/backends/ (the shared adapter code), core/, schema/,
                  truth/ never (but the reference), and its own folder's parts: never a recipe nor provision/.
    native.py     the native recipe, named by `native=`: `start(StartContext) -> Deployment`, its build
                  functions (`builds`), and for an engine `tier(name) -> EngineTier` (`tiers`). It may import
                  provision/ (the shared machinery: provision/base.py, gobuild.py, pgcluster.py,
                  native/goengine.py), never an adapter module nor backends/.
    schema files  what the adapter sends its server (postgres.sql, rebac.zed, rebac.fga, rebac.perm, cql.cql,
                  a mapping .json), read by the adapter as `Path(__file__).parent / "NAME"`.
    helper dirs   non-Python sources the recipe builds (scylla/cassandra_bulk/, elasticsearch/es_launcher/).
    export.py     its graphs read back as the model's Edges (`readers=`: READERS, format -> reader), for
                  `authzbench import`; on the adapter side.
    crosscheck.py what `authzbench crosscheck` needs of it (`crosscheck=`: TOOL, CLIENT, driver_call, and
                  GRPC_CALL + requests for ghz or statement for pgbench), on the adapter side.
    tools/        its own experiments (`python -m authzbench.systems.<name>.tools.<tool>`), in the command
                  layer.

Outside the folder a system has only: its compose services (compose/docker-compose.yaml, named in `services`),
its pinned versions (compose/versions.env) and its pip extra (pyproject.toml, named in `extra`). Tests walk
every folder: the adapter side and the recipe never import each other, and every declared name agrees with
pyproject, the compose file and versions.env.

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
    # the step NAME@VERSION replaces by the system's `versioned` build of that version
    per_version: bool = False


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
    # Why its API has no reverse lookup (the resources a user can reach); "" = it has one. Its lookup phases
    # are then recorded as not run with this reason, and its restore checks ask the anchor users by checks.
    no_lookup: str = ""
    claims: tuple[Claim, ...] = field(default_factory=tuple)
    order: int = 100  # its place in listings and in the default run order (then the name)
    # other names it goes by (products, stand-ins): no module outside systems/ says them
    aliases: tuple[str, ...] = ()
    # "module:function" ComposeFile -> endpoint, for a system without an adapter to read it
    endpoint: str = ""
    image: str = ""  # the local image (compose/local/<image>/) its services run under --local-images
    image_files: str = ""  # "module:function" -> {name in the build context: path}: what that image copies in
    image_versions: str = ""  # "module:function" -> {versions.env name: what the local image really runs}
    worker_limit: str = ""  # "module:attribute": the most workers its native server takes ("" = no limit)
    crosscheck: str = ""  # "module:function" -> a Crosscheck: the independent load tool run beside it
    # "module:attribute" -> {format: reader(source, mapper) -> Edges}: its graphs `authzbench import` reads
    readers: str = ""
    loadtest: int = 0  # its place among the default engines of `authzbench loadtest` (0 = not one of them)
    # What the report states about it alone (read through authzbench/report/core/declared.py):
    stale_reports: tuple[str, ...] = ()  # upstream reports of its fresh-mode reads missing a committed write
    # tools/newenemy_repro.py reproduces that outside the suite (through its API)
    stale_reproduced: bool = False
    # the engine older runs recorded for its stand-in, before the server record
    legacy_titles: tuple[str, ...] = ()
    # named the product (its first alias) it stands in for
    cpu_counts: str = ""  # what the monitor's server CPU counts for it, when more than its server process
    # "module:function" version -> GoModule: the recipe's build of another release, so that `--backend
    # NAME@vX.Y.Z` runs that release beside (or instead of) the pinned one ("" = no versioned build)
    versioned: str = ""


# The one build step several systems share: the Debian PostgreSQL their private clusters run on.
POSTGRES_SERVER = Build("PostgreSQL server (apt)", "authzbench.provision.pgcluster:bin_dir",
                        "authzbench.provision.pgcluster:installed")


def hand_built(store: str) -> tuple[Claim, ...]:
    """What a permission model built by hand on `store` gives beyond its checks: nothing the suite's model
    builds (each feature would be written on top of the store by the team that owns it)."""
    why = (f"none of these: the model built by hand on {store} answers checks and lookups only; each would "
           "be built on the store")
    return tuple(Claim(f, False, why) for f in FEATURES)
