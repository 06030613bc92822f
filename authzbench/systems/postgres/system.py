"""PostgreSQL with relation tables and a materialized group closure, hand-built (psycopg)."""

from authzbench.systems.contract import BOTH, POSTGRES_SERVER, System, hand_built

SYSTEM = System(
    name="postgres", adapter="authzbench.systems.postgres.adapter:PostgresBackend",
    native="authzbench.systems.postgres.native", models=BOTH, drivers=("psycopg",), extra="postgres",
    services=("postgres",), builds=(POSTGRES_SERVER,), image="postgres",
    image_versions="authzbench.systems.postgres.native:image_versions",
    worker_limit="authzbench.systems.postgres.native:WORKER_LIMIT",
    crosscheck="authzbench.systems.postgres.crosscheck", colour=0, order=1,
    claims=hand_built("PostgreSQL"),
)
