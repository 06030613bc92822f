"""Elasticsearch with expanded user sets per resource; natively a 7.17 OSS node from Maven Central jars."""

from authzbench.systems.contract import Build, System, hand_built

SYSTEM = System(
    name="elasticsearch", adapter="authzbench.systems.elasticsearch.adapter:ElasticsearchBackend",
    native="authzbench.systems.elasticsearch.native", drivers=("elasticsearch",), extra="elasticsearch",
    services=("elasticsearch",),
    builds=(
        Build(
            "elasticsearch node launcher (mvn package)", "authzbench.systems.elasticsearch.native:node_build",
            "authzbench.systems.elasticsearch.native:built", "~1 min"),),
    image="elasticsearch", image_files="authzbench.systems.elasticsearch.native:image_files",
    image_versions="authzbench.systems.elasticsearch.native:image_versions", colour=4, order=9,
    aliases=("Elasticsearch",),
    claims=hand_built("Elasticsearch"),
)
