"""ClickHouse over HTTP (clickhouse-connect); natively chdb, the embedded engine, in process."""

from authzbench.systems.contract import System, hand_built

SYSTEM = System(
    name="clickhouse", adapter="authzbench.systems.clickhouse.adapter:ClickHouseBackend",
    native="authzbench.systems.clickhouse.native", drivers=("clickhouse-connect", "chdb"), extra="clickhouse",
    services=("clickhouse",), stand_in="chdb (embedded) natively", colour=3, order=8,
    aliases=("ClickHouse", "chdb"),
    claims=hand_built("ClickHouse"),
)
