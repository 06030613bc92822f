"""ScyllaDB over CQL with precomputed permission tables; natively Apache Cassandra stands in (no ScyllaDB
binary is obtainable here), loaded through SSTables a Java helper writes."""

from authzbench.systems.contract import Build, System, hand_built

SYSTEM = System(
    name="scylla", adapter="authzbench.systems.scylla.adapter:ScyllaBackend",
    native="authzbench.systems.scylla.native", drivers=("cassandra-driver",), extra="scylla",
    services=("scylla",),
    # jars() (~67 MB from Maven Central) states no duration; bulk_tool() fetches them first, then ~10 s of
    # javac
    builds=(Build("cassandra jars and bulk helper (mvn, javac)", "authzbench.systems.scylla.native:bulk_tool",
                  "authzbench.systems.scylla.native:built"),),
    tools="authzbench.systems.scylla.native:tools", image="cassandra",
    image_files="authzbench.systems.scylla.native:image_files",
    image_versions="authzbench.systems.scylla.native:image_versions",
    stand_in="Apache Cassandra natively", colour=2, order=7, aliases=("ScyllaDB", "Cassandra"),
    legacy_titles=("Apache Cassandra",),
    claims=hand_built("Cassandra / ScyllaDB"),
)
