"""Permify (gRPC, its classes from the server's reflection), on a private PostgreSQL natively."""

from authzbench.systems.contract import BOTH, POSTGRES_SERVER, Build, System

SYSTEM = System(
    name="permify", adapter="authzbench.systems.permify.adapter:PermifyBackend",
    native="authzbench.systems.permify.native", models=BOTH,
    # permify (the PyPI package): the REST clients authzbench.systems.permify.tools.clients compares with the
    # gRPC.
    drivers=("permify", "grpcio", "grpcio-reflection", "psycopg"), extra="permify", services=("permify",),
    builds=(POSTGRES_SERVER, Build("permify (go build)", "authzbench.systems.permify.native:binary",
                                   "authzbench.systems.permify.native:built", "~3.5 min")),
    tiers="authzbench.systems.permify.native:tier", image="permify",
    image_files="authzbench.systems.permify.native:image_files",
    image_versions="authzbench.systems.permify.native:image_versions",
    crosscheck="authzbench.systems.permify.crosscheck", loadtest=1, colour=7, order=4, aliases=("Permify",),
)
