"""Which relation of a graph read from elsewhere is which relation of the model (issue 69).

A source names a relationship `object_type:id#relation@subject_type:id[#subject_relation]`; the model
stores it in one of its RelationDefs (schema/model.py). A mapping says, per source key
`object_type#relation@subject_type[#subject_relation]`, which RelationDef it is. The suite's own
schema names (the rebac.zed / rebac.fga the adapters load) map with no file: the default
mapping is derived from the RelationDefs themselves. Anything else is given as a small TOML file:

    # mapping.toml
    model = "rebac"        # optional (rebac)
    defaults = true        # optional: the schema's own names map too (true)
    [relations]
    "team#member@user" = "group_member"
    "team#member@team#member" = "group_child"
    "team#admin@user" = "group_manager"
    "doc#viewer@user" = "resource_viewer_user"
    "doc#viewer@team" = "resource_viewer_group"
    "doc#owner@team" = "resource_manager_group"

A `Mapper` applies a mapping to one source's rows: a row whose key has no mapping, a caveated or conditional
relationship (the model has no caveats) or a wildcard subject on a relation that is not a wildcard one is
refused in one line naming the source, row and reason; with `drop_unmapped` it is counted instead
(`Mapper.dropped`). A malformed row is always refused (`Mapper.malformed`).
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from authzbench.core.errors import UserError
from authzbench.imports.edges import Edge
from authzbench.schema.model import MODELS, RelationDef, relation_defs

Key = tuple[str, str, str, str]  # (object type, relation, subject type, subject relation or "")
_KEY = re.compile(r"^([^\s#@:]+)#([^\s#@:]+)@([^\s#@:]+)(?:#([^\s#@:]+))?$")
WILDCARD = "*"


def key_text(k: Key) -> str:
    return f"{k[0]}#{k[1]}@{k[2]}" + (f"#{k[3]}" if k[3] else "")


def parse_key(text: str) -> Key | None:
    """`type#relation@subject_type[#subject_relation]` as a Key, None when it is not one."""
    m = _KEY.match(text.strip())
    return (m[1], m[2], m[3], m[4] or "") if m else None


def def_key(d: RelationDef, renames: dict[str, str] | None = None) -> Key:
    """The key a RelationDef is written under in the suite's schema files (renames: a system's reserved names,
    e.g. OpenFGA's `self`, as its adapter writes them)."""
    r = renames or {}
    return (d.object_type, r.get(d.relation, d.relation), d.subject_type,
            r.get(d.subject_relation, d.subject_relation) if d.subject_relation else "")


@dataclass(frozen=True)
class Mapping:
    model: str
    relations: dict[Key, str]  # source key -> RelationDef name of `model`
    origin: str  # what the manifest records: "the rebac schema's own names" or the file and its entries

    def describe(self) -> dict[str, object]:
        """How the graph was mapped, for the dataset's manifest and the report."""
        return {"model": self.model, "origin": self.origin,
                "relations": {key_text(k): v for k, v in sorted(self.relations.items())}}


def default_mapping(model: str = "rebac", renames: dict[str, str] | None = None) -> Mapping:
    """The suite's own schema names, each onto its RelationDef (metadata such as group_org included: a source
    that carries `group:g#org@organization:o` says which org a group belongs to)."""
    rels = {def_key(d, renames): d.name for d in relation_defs(model).values()}
    return Mapping(model, rels, f"the {model} schema's own names")


def load_mapping(path: str | Path, renames: dict[str, str] | None = None) -> Mapping:
    """A mapping file (TOML, the module docstring's layout); every mistake in it is one line naming it."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except OSError as e:
        raise UserError(f"mapping {p}: cannot read it: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"mapping {p}: not TOML: {e}") from None
    unknown = set(doc) - {"model", "defaults", "relations"}
    if unknown:
        raise UserError(f"mapping {p}: unknown key {sorted(unknown)[0]!r}; valid: model, defaults, relations")
    model = doc.get("model", "rebac")
    if model not in MODELS:
        raise UserError(f"mapping {p}: model {model!r}; valid: {', '.join(MODELS)}")
    if not isinstance(doc.get("defaults", True), bool) or not isinstance(doc.get("relations", {}), dict):
        raise UserError(f"mapping {p}: `defaults` must be true or false and [relations] a table")
    base = default_mapping(model, renames).relations if doc.get("defaults", True) else {}
    given = {_entry(p, model, k, v): v for k, v in doc.get("relations", {}).items()}
    if not given and not base:
        raise UserError(f"mapping {p}: maps nothing (defaults = false and no [relations])")
    origin = f"{p.name} ({len(given)} entries{', with the schema names' if base else ''})"
    return Mapping(model, {**base, **given}, origin)


def _entry(p: Path, model: str, key: str, value: object) -> Key:
    k = parse_key(key)
    if k is None:
        raise UserError(f"mapping {p}: {key!r} is not type#relation@subject_type[#subject_relation]")
    defs = relation_defs(model)
    if value not in defs:
        raise UserError(f"mapping {p}: {key!r} = {value!r}: not a {model} relation; valid: {', '.join(defs)}")
    return k


class Mapper:
    """A mapping applied to one source's rows (see the module docstring): Edges, refusals and drops."""

    def __init__(self, mapping: Mapping, drop_unmapped: bool = False) -> None:
        self.mapping = mapping
        self.drop_unmapped = drop_unmapped
        self.defs = relation_defs(mapping.model)
        self.dropped: Counter[str] = Counter()  # "doc#owner@user: no mapping" -> rows dropped

    def edge(self, obj: tuple[str, str], relation: str, subj: tuple[str, str, str], where: str,
             caveat: str = "") -> Edge | None:
        """The Edge of one source row: obj = (type, id), subj = (type, id, relation or ""); caveat names the
        row's caveat or condition ("" = none). None when the row is dropped (counted)."""
        key = (obj[0], relation, subj[0], subj[2])
        name = self.mapping.relations.get(key)
        if name is None:
            return self._unmapped(
                where, key, f"no mapping for {key_text(key)} (mapped: {self.mapping.origin})")
        if caveat:
            return self._unmapped(where, key, f"caveat or condition {caveat!r}: the model has none")
        d = self.defs[name]
        if (subj[1] == WILDCARD) != d.wildcard:
            why = "a wildcard subject" if subj[1] == WILDCARD else "a subject that is not a wildcard"
            return self._unmapped(where, key, f"{why} on {name}")
        for what, value in (("object", obj[1]), ("subject", subj[1])):
            if not value:
                self.malformed(where, f"empty {what} id")
        return Edge(name, obj[1], subj[1], where)

    def _unmapped(self, where: str, key: Key, reason: str) -> None:
        if not self.drop_unmapped:
            fix = "give a mapping file or --drop-unmapped" if reason.startswith("no mapping") else \
                "--drop-unmapped drops such rows"
            raise UserError(f"{where}: {reason}; {fix}")
        self.dropped[f"{key_text(key)}: {reason.split(' (')[0]}"] += 1
        return None

    @staticmethod
    def malformed(where: str, reason: str) -> NoReturn:
        """A row that is not a relationship at all: refused whatever drop_unmapped says."""
        raise UserError(f"{where}: malformed row: {reason}")
