"""schema/*.fga (OpenFGA) and schema/*.zed (SpiceDB) describe the same relations and permissions, and every
relation of the dataset's catalog is a tuple the OpenFGA model accepts. No server needed: the real server
validates the same JSON model in tests/backends/test_openfga.py."""

from __future__ import annotations

import re
from typing import Any

import pytest

from authzbench.core.errors import UserError
from authzbench.schema.model import MODELS, relation_defs
from authzbench.systems.openfga.adapter import (
    RENAMES,
    OpenFGABackend,
    _rewrite,
    _tokens,
    dsl_to_model,
    model_json,
    tuple_key,
)
from authzbench.systems.spicedb.adapter import SCHEMA_DIR as ZED_DIR


def _zed_direct(types: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in (x.strip() for x in types.split("|")):
        if t.endswith(":*"):
            out.append({"type": t[:-2], "wildcard": {}})
        elif "#" in t:
            out.append({"type": t.split("#")[0], "relation": RENAMES.get(t.split("#")[1], t.split("#")[1])})
        else:
            out.append({"type": t})
    return out


def _zed_expr(expr: str) -> str:
    """SpiceDB's operators in OpenFGA's words: + or, & and, - but not, a->b is `b from a`."""
    expr = re.sub(r"\b(\w+)->(\w+)", r"\2 from \1", expr)
    expr = expr.replace("+", " or ").replace("&", " and ").replace(" - ", " but not ")
    return re.sub(r"\bself\b", RENAMES["self"], expr)


def zed_to_model(text: str) -> dict[str, Any]:
    """The .zed file as the same JSON authorization model dsl_to_model makes of a .fga file."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    types = []
    for m in re.finditer(r"definition\s+(\w+)\s*\{(.*?)\}", text, re.S):
        rels: dict[str, Any] = {}
        meta: dict[str, Any] = {}
        for line in (ln.strip() for ln in m.group(2).splitlines()):
            kind, _, rest = line.partition(" ")
            if kind == "relation":
                name, _, types_ = rest.partition(":")
                name = RENAMES.get(name.strip(), name.strip())
                rels[name], meta[name] = {"this": {}}, {"directly_related_user_types": _zed_direct(types_)}
            elif kind == "permission":
                name, _, expr = rest.partition("=")
                rels[name.strip()] = _rewrite(_tokens(_zed_expr(expr)), [])
                meta[name.strip()] = {"directly_related_user_types": []}
        types.append(
            {"type": m.group(1), "relations": rels, "metadata": {"relations": meta} if rels else None})
    return {"schema_version": "1.1", "type_definitions": types, "conditions": {}}


@pytest.mark.parametrize("model", MODELS)
def test_fga_and_zed_files_define_the_same_relations_and_permissions(model):
    fga = model_json(model)
    zed = zed_to_model((ZED_DIR / f"{model}.zed").read_text())
    assert [t["type"] for t in fga["type_definitions"]] == [t["type"] for t in zed["type_definitions"]]
    for f, z in zip(fga["type_definitions"], zed["type_definitions"], strict=True):
        assert f == z, f"type {f['type']}: .fga and .zed differ"


@pytest.mark.parametrize("model", MODELS)
def test_every_catalog_relation_is_a_tuple_the_model_accepts(model):
    types = {t["type"]: t for t in model_json(model)["type_definitions"]}
    for d in relation_defs(model).values():
        if not d.authz:
            continue
        key = tuple_key(d, 1, 2)
        obj_type = key["object"].split(":")[0]
        direct = types[obj_type]["metadata"]["relations"][key["relation"]]["directly_related_user_types"]
        user_type, _, rest = key["user"].partition(":")
        want: dict[str, Any] = {"type": user_type}
        if rest == "*":
            want["wildcard"] = {}
        elif "#" in rest:
            want["relation"] = rest.split("#")[1]
        assert want in direct, f"{d.name}: {key} is not allowed by the model"


def test_mixed_operators_without_parentheses_are_refused():
    with pytest.raises(ValueError, match="parentheses"):
        dsl_to_model("model\n  schema 1.1\ntype user\n  relations\n    define a: [user]\n"
                     "    define b: [user]\n    define c: a or b but not a\n")


def test_self_is_renamed_because_openfga_reserves_it():
    social = {t["type"]: t for t in model_json("social")["type_definitions"]}
    assert "self" not in social["user"]["relations"] and "identity" in social["user"]["relations"]
    assert tuple_key(relation_defs("social")["user_self"], 3, 3) == {"user": "user:3", "relation": "identity",
                                                                      "object": "user:3"}


def test_wildcard_and_userset_tuples():
    social = relation_defs("social")
    assert tuple_key(social["content_public"], 5, 0)["user"] == "user:*"
    assert tuple_key(social["content_followers_visible"], 5, 9)["user"] == "user:9#follower"
    assert tuple_key(relation_defs("rebac")["group_child"], 1, 2) == {
        "user": "group:2#membership", "relation": "member", "object": "group:1"}


def test_external_url_carries_key_and_assumes_openfgas_default_caps():
    ep = OpenFGABackend.endpoint_from_url("http://s3cret@fga.example:8081")
    assert ep["url"] == "http://fga.example:8081" and ep["preshared_key"] == "s3cret"
    assert (ep["max_results"], ep["deadline_s"]) == (1000, 3.0)  # lookups reaching them fail loudly
    ep = OpenFGABackend.endpoint_from_url("https://k@h?max_results=0&deadline_s=0&max_tuples_per_write=500")
    assert (ep["max_results"], ep["deadline_s"], ep["max_tuples_per_write"]) == (0, 0.0, 500)
    with pytest.raises(UserError, match="must look like"):
        OpenFGABackend.endpoint_from_url("grpc://k@h:1")
