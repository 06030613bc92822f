"""OpenFGA (HTTP through its SDK; gRPC for the crosscheck), on a private PostgreSQL natively."""

from authzbench.systems.contract import BOTH, POSTGRES_SERVER, Build, Claim, System

OPENFGA_CLAIMS = (
    Claim("consistency tokens", False, "none: a consistency preference per request (MINIMIZE_LATENCY or "
          "HIGHER_CONSISTENCY), no token"),
    Claim("watch / change stream", True, "ReadChanges: a paged change log a client polls (no push stream)"),
    Claim("wildcards", True, "type-bound public access: user:* in the model"),
    Claim("conditions", True, "conditions: CEL expressions on tuples, evaluated with the request's context"),
    Claim("schema change without a reload", True,
          "WriteAuthorizationModel adds a model version; a request names the one it uses"),
)

SYSTEM = System(
    name="openfga", adapter="authzbench.systems.openfga.adapter:OpenFGABackend",
    native="authzbench.systems.openfga.native", models=BOTH, drivers=("openfga-sdk", "psycopg"),
    extra="openfga",
    services=("openfga",),
    builds=(POSTGRES_SERVER,
            Build("openfga (go build)", "authzbench.systems.openfga.native:binary",
                  "authzbench.systems.openfga.native:built", "~6.5 min", per_version=True)),
    versioned="authzbench.systems.openfga.native:go_module",
    tiers="authzbench.systems.openfga.native:tier", image="openfga",
    image_files="authzbench.systems.openfga.native:image_files",
    image_versions="authzbench.systems.openfga.native:image_versions",
    readers="authzbench.systems.openfga.export:READERS",
    crosscheck="authzbench.systems.openfga.crosscheck", loadtest=3, colour=6, order=3, aliases=("OpenFGA",),
    # a fresh-mode read missing a committed write
    stale_reports=("https://github.com/openfga/openfga/pull/2843",),
    claims=OPENFGA_CLAIMS,
)
