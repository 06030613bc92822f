"""MongoDB with grant documents; natively FerretDB on PostgreSQL stands in (the only MongoDB-wire server
obtainable here)."""

from authzbench.systems.contract import POSTGRES_SERVER, Build, System, hand_built

SYSTEM = System(
    name="mongo", adapter="authzbench.systems.mongo.adapter:MongoBackend",
    native="authzbench.systems.mongo.native", drivers=("pymongo", "psycopg"), extra="mongo",
    services=("mongo",),
    builds=(POSTGRES_SERVER,
            Build("ferretdb (go build)", "authzbench.systems.mongo.native:binary",
                  "authzbench.systems.mongo.native:built", "~3-6 min")),
    stand_in="FerretDB on PostgreSQL natively", colour=5, order=10, aliases=("MongoDB", "FerretDB"),
    legacy_titles=("FerretDB",),
    claims=hand_built("MongoDB"),
)
