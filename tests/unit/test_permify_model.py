"""schema/*.perm (Permify) accepts every relation of the dataset's catalog (the social wildcard as the
is_public attribute), the recipe's loopback patch rewrites the three all-interface listeners of upstream's
server.go and refuses a source it does not recognise, and an external URL carries key and write limit.
No server needed: the real server validates the schemas in tests/backends/test_permify.py."""

from __future__ import annotations

import re

import pytest

from authzbench.backends.permify import (
    PUBLIC_ATTRIBUTE,
    PermifyBackend,
    attribute_json,
    schema_text,
    tuple_json,
)
from authzbench.errors import BackendUnavailable, UserError
from authzbench.model import MODELS, relation_defs
from authzbench.provision.native import permify as recipe


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


def test_external_url_carries_key_and_assumes_permifys_default_write_limit():
    ep = PermifyBackend.endpoint_from_url("http://k3y@db.example:3476")
    assert ep["url"] == "http://db.example:3476" and ep["preshared_key"] == "k3y"
    assert ep["max_data_per_write"] == 1000
    with pytest.raises(UserError, match="must look like"):
        PermifyBackend.endpoint_from_url("grpc://db.example")


def test_without_a_cached_binary_or_go_the_backend_says_why_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTHZBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no go
    assert recipe.unavailable() == "permify: no Go toolchain to build it (install Go >= 1.25)"
