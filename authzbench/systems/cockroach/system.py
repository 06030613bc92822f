"""The hand-built CockroachDB model: compose services only, no adapter. No CockroachDB server can be obtained
on these machines to test one against, and an adapter is only trusted once tested against the real server."""

from authzbench.systems.contract import System, hand_built

SYSTEM = System(
    name="cockroach", adapter="",
    why_not_native="no adapter yet: no CockroachDB server is obtainable here to test one against "
                   "(SpiceDB on CockroachDB is spicedb-crdb)",
    default=False, services=("cockroach",),
    endpoint="authzbench.systems.cockroach.endpoint:endpoint_from_compose",
    colour=9, order=6, aliases=("CockroachDB", "crdb"),
    claims=hand_built("CockroachDB"),
)
