"""The SpiceDB import's hand-made protobuf bytes equal what the protobuf library serializes."""

from __future__ import annotations

from authzed.api.v1.permission_service_pb2 import ImportBulkRelationshipsRequest

from authzbench.schema.model import MODELS, relation_defs
from authzbench.systems.spicedb.adapter import SpiceDBBackend, encode_relationships


def test_encoding_is_byte_identical_to_protobuf_for_every_relation_of_every_model():
    b = SpiceDBBackend({"addr": "unused:1", "preshared_key": "k"}, {})
    objs = [0, 7, 127, 128, 99_999, 2_147_483_647]  # 1- to 10-digit ids
    subs = [5, 0, 1_000_000, 42, 3, 16_384]
    for model in MODELS:
        for d in relation_defs(model).values():
            if not d.authz:
                continue
            expected = ImportBulkRelationshipsRequest(
                relationships=[b._rel(d, str(o), str(s)) for o, s in zip(objs, subs, strict=True)])
            got = encode_relationships(d, objs, subs)
            assert got == expected.SerializeToString(), d.name
            assert ImportBulkRelationshipsRequest.FromString(got) == expected


def test_name_follows_the_datastore_and_external_urls_parse():
    assert SpiceDBBackend({"datastore": "postgres"}).name == "spicedb-pg"
    assert SpiceDBBackend({"datastore": "cockroachdb"}).name == "spicedb-crdb"
    ep = SpiceDBBackend.endpoint_from_url("grpc://s3cret@db.example:50051?datastore=cockroachdb")
    assert ep["addr"] == "db.example:50051" and ep["preshared_key"] == "s3cret" and not ep["tls"]
    assert SpiceDBBackend(ep).name == "spicedb-crdb"
    assert SpiceDBBackend.endpoint_from_url("grpcs://k@h?ca=/x.pem")["tls"] is True
