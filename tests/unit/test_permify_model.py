"""schema/*.perm (Permify) accepts every relation of the dataset's catalog (the social wildcard as the
is_public attribute), the recipe's loopback patch rewrites the three all-interface listeners of upstream's
server.go and refuses a source it does not recognise, an external URL carries key, gRPC address and write
limit, and gRPC statuses map to the adapter's errors.
No server needed: the real server validates the schemas in tests/backends/test_permify.py."""

from __future__ import annotations

import re

import grpc
import pytest

from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.schema.model import MODELS, relation_defs
from authzbench.systems.permify import native as recipe
from authzbench.systems.permify.adapter import (
    PUBLIC_ATTRIBUTE,
    PermifyBackend,
    attribute_json,
    schema_text,
    tuple_json,
)
from authzbench.systems.permify.grpc import PermifyError


def _entities(text: str) -> dict[str, str]:
    text = re.sub(r"//.*", "", text)
    return {m.group(1): m.group(2) for m in re.finditer(r"entity\s+(\w+)\s*\{(.*?)\}", text, re.S)}


@pytest.mark.parametrize("model", MODELS)
def test_every_catalog_relation_is_a_relation_or_the_public_attribute_of_the_schema(model):
    entities = _entities(schema_text(model))
    for d in relation_defs(model).values():
        if not d.authz:
            continue
        body = entities[d.object_type]
        if d.wildcard:
            assert re.search(rf"attribute\s+{PUBLIC_ATTRIBUTE}\s+boolean", body), d
            assert attribute_json(d, 7)["entity"] == {"type": d.object_type, "id": "7"}
            continue
        t = tuple_json(d, 1, 2)
        subject = d.subject_type + (f"#{t['subject']['relation']}" if t["subject"].get("relation") else "")
        line = re.search(rf"relation\s+{t['relation']}\s+(.*)", body)
        assert line and f"@{subject}" in line.group(1).split(), (d, line and line.group(0))


def test_both_models_define_the_permissions_the_harness_checks():
    rebac, social = _entities(schema_text("rebac")), _entities(schema_text("social"))
    assert "permission manage" in rebac["resource"] and "permission view" in rebac["resource"]
    assert all("permission view" in social[t] for t in ("user", "content", "interaction"))


UPSTREAM = '''
			pprofserver := &http.Server{
				Addr:         ":" + profiler.Port,
	lis, err = net.Listen("tcp", ":"+srv.GRPC.Port)
	invokeLis, err = net.Listen("tcp", ":"+dst.Port)
		httpTargetAddr := net.JoinHostPort(srv.Host, srv.HTTP.Port) // HTTP server address
'''


def test_loopback_patch_binds_every_listener_to_the_server_host(tmp_path):
    f = tmp_path / recipe.SERVER_GO
    f.parent.mkdir(parents=True)
    f.write_text(UPSTREAM)
    recipe.apply_loopback_patch(tmp_path)
    text = f.read_text()
    assert '":"' not in text
    assert text.count("net.JoinHostPort(srv.Host,") == 4


def test_loopback_patch_refuses_a_source_without_the_lines_it_rewrites(tmp_path):
    f = tmp_path / recipe.SERVER_GO
    f.parent.mkdir(parents=True)
    f.write_text(UPSTREAM.replace('":"+dst.Port', "dstAddr"))
    with pytest.raises(BackendUnavailable, match="loopback patch expects"):
        recipe.apply_loopback_patch(tmp_path)


def test_without_proxy_or_source_the_error_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(recipe.SOURCE_ENV, raising=False)
    with pytest.raises(BackendUnavailable, match=recipe.SOURCE_ENV):
        recipe.source_from_env(tmp_path / "src", "go mod download failed")


def test_a_source_of_another_version_is_refused(tmp_path, monkeypatch):
    src = tmp_path / "tree"
    (src / "internal").mkdir(parents=True)
    (src / "go.mod").write_text(f"module {recipe.MODULE}\n")
    (src / "internal" / "info.go").write_text('Version = "v1.6.0"\n')
    monkeypatch.setenv(recipe.SOURCE_ENV, str(src))
    with pytest.raises(BackendUnavailable, match="v1.6.0"):
        recipe.source_from_env(tmp_path / "src", "refused")


def test_external_url_carries_key_grpc_address_and_assumes_permifys_default_write_limit():
    ep = PermifyBackend.endpoint_from_url("http://k3y@db.example:3476")
    assert ep["url"] == "http://db.example:3476" and ep["preshared_key"] == "k3y"
    assert ep["grpc_addr"] == "db.example:3478" and not ep["grpc_tls"]  # Permify's default gRPC port
    assert ep["max_data_per_write"] == 1000
    ep = PermifyBackend.endpoint_from_url("https://k3y@db.example?grpc=grpc.example:443")
    assert ep["grpc_addr"] == "grpc.example:443" and ep["grpc_tls"]
    with pytest.raises(UserError, match="must look like"):
        PermifyBackend.endpoint_from_url("grpc://db.example")
    with pytest.raises(UserError, match="must be host:port"):
        PermifyBackend.endpoint_from_url("http://k3y@db.example?grpc=db.example")


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def test_grpc_statuses_map_to_the_adapters_errors():
    from authzbench.measure.timing import is_timeout
    from authzbench.systems.permify.grpc import Api

    api = object.__new__(Api)  # the mapping only: no channel
    api.addr, api.timeout = "127.0.0.1:3478", 2.0
    lost = api.error(_RpcError(grpc.StatusCode.UNAVAILABLE, "Socket closed"), "Permission.Check")
    assert type(lost) is BackendUnavailable
    assert (
        str(lost) == "permify: lost the connection to Permify at 127.0.0.1:3478: UNAVAILABLE (Socket closed)")
    for code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        e = api.error(_RpcError(code, "invalid key"), "Tenancy.List")
        assert isinstance(e, UserError) and "rejected the preshared key" in str(e)
    late = api.error(_RpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"), "Permission.Check")
    assert type(late) is BackendUnavailable and is_timeout(late)  # the runner counts it as a timeout
    e = api.error(
        _RpcError(grpc.StatusCode.INVALID_ARGUMENT, "ERROR_CODE_DEPTH_NOT_ENOUGH"), "Permission.Check")
    assert isinstance(e, PermifyError) and (e.status, e.message) == (
        "INVALID_ARGUMENT", "ERROR_CODE_DEPTH_NOT_ENOUGH")
    assert str(e) == "permify: INVALID_ARGUMENT ERROR_CODE_DEPTH_NOT_ENOUGH"


def test_the_public_attribute_value_is_a_serialized_boolean_true():
    from google.protobuf import wrappers_pb2

    assert attribute_json(relation_defs("social")["content_public"], 3)["value"] == {
        "type_url": "type.googleapis.com/base.v1.BooleanValue",
        # field 1 = true, as BooleanValue.data
        "value": wrappers_pb2.BoolValue(value=True).SerializeToString()}


def test_without_a_cached_binary_or_go_the_backend_says_why_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTHZBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no go
    assert recipe.unavailable() == "permify: no Go toolchain to build it (install Go >= 1.25)"


def test_an_endpoint_without_a_grpc_address_is_one_clear_error():
    with pytest.raises(UserError, match=r"no gRPC address .*\?grpc=host:port"):
        PermifyBackend({"url": "http://127.0.0.1:3476", "preshared_key": "k"}, {}).connect()
