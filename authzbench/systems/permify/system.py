"""Permify (gRPC, its classes from the server's reflection), on a private PostgreSQL natively."""

from authzbench.systems.contract import BOTH, POSTGRES_SERVER, Build, Claim, System

PERMIFY_CLAIMS = (
    Claim("consistency tokens", True, "snap tokens: a write returns one, a read with it sees the write",
          "tests/backends/test_permify.py::test_snap_token_reads_see_the_clients_own_revocation"),
    Claim("watch / change stream", True, "the Watch API streams data changes (PostgreSQL with "
          "track_commit_timestamp on)"),
    Claim("wildcards", True,
          "public access as an attribute rule (is_public), the form the suite's schema uses",
          "tests/backends/test_permify.py::test_public_attribute_write_and_delete_change_visibility"),
    Claim("conditions", True, "attribute-based rules evaluated with the request's context"),
    Claim("schema change without a reload", True,
          "WriteSchema stores a schema version; a request may name one"),
)

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
    claims=PERMIFY_CLAIMS,
)
