"""OpenFGA (HTTP through its SDK; gRPC for the crosscheck), on a private PostgreSQL natively."""

from authzbench.systems.contract import BOTH, POSTGRES_SERVER, Build, System

SYSTEM = System(
    name="openfga", adapter="authzbench.systems.openfga.adapter:OpenFGABackend",
    native="authzbench.systems.openfga.native", models=BOTH, drivers=("openfga-sdk", "psycopg"),
    extra="openfga",
    services=("openfga",),
    builds=(POSTGRES_SERVER,
            Build("openfga (go build)", "authzbench.systems.openfga.native:binary",
                  "authzbench.systems.openfga.native:built", "~6.5 min")),
    tiers="authzbench.systems.openfga.native:tier", image="openfga",
    image_files="authzbench.systems.openfga.native:image_files",
    image_versions="authzbench.systems.openfga.native:image_versions",
    crosscheck="authzbench.systems.openfga.crosscheck", loadtest=3, colour=6, order=3, aliases=("OpenFGA",),
    # a fresh-mode read missing a committed write
    stale_reports=("https://github.com/openfga/openfga/pull/2843",),
)
