"""An OpenFGA store read back as the model's Edges (issue 69): from a live store or from a tuples file.

Live store (`read_server`): the Read API with no tuple key (every tuple of the store), PAGE tuples a request,
followed by its continuation token, at HIGHER_CONSISTENCY. The server is reached as the adapter reaches it
(OpenFGABackend: its endpoint dict or an http://PRESHARED_KEY@host:port URL); the store is named by its name
or its id (default: the adapter's own store for the mapping's model, `authzbench-rebac`).

Tuples file (`read_file`), by its suffix:
  - `.json`: what `fga tuple read` prints, `{"tuples": [{"key": {"user", "relation", "object"}}, ...]}` (the
    Read API's response), or a list of `{"user", "relation", "object"}` (`fga tuple read --simple-output` /
    `--output-format=simple-json`, and the file `fga tuple write --file` takes);
  - `.jsonl`: one such tuple a line;
  - `.yaml` / `.yml`: a list of tuples, or a store file's `tuples:` list;
  - `.csv`: the CLI's columns `user_type,user_id,user_relation,relation,object_type,object_id` (and
    `condition_name,condition_context`).
A tuple with a condition is refused as the mapping refuses a caveat (the model has none). The suite's model
renames the relation `self` to `identity` (adapter RENAMES): the default mapping reads it back so.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.imports.edges import Edge
from authzbench.imports.mapping import Mapper, default_mapping

PAGE = 100  # tuples per Read request: the Read API's largest page
CSV_COLUMNS = ("user_type", "user_id", "user_relation", "relation", "object_type", "object_id")
_ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")  # a store id (OpenFGA's ids are ULIDs)


def mapping_renames() -> dict[str, str]:
    """The model's names this adapter writes otherwise (OpenFGA reserves `self`): the import command's
    default mapping and any mapping file read through them."""
    from authzbench.systems.openfga.adapter import RENAMES

    return RENAMES


def suite_mapping(model: str = "rebac") -> Mapper:
    """The suite's own model names (with its renames), for a store the adapter loaded."""
    return Mapper(default_mapping(model, mapping_renames()))


def tuple_edge(user: Any, relation: Any, obj: Any, where: str, mapper: Mapper,
               condition: str = "") -> Edge | None:
    """One tuple (user `type:id[#relation]`, relation, object `type:id`), mapped."""
    if not all(isinstance(v, str) and v for v in (user, relation, obj)):
        mapper.malformed(where, "a tuple needs user, relation and object, each a non-empty string")
    otype, _, oid = obj.partition(":")
    subject, _, srel = user.partition("#")
    stype, _, sid = subject.partition(":")
    if not (otype and oid and stype and sid):
        mapper.malformed(where, f"user {user!r} or object {obj!r} is not type:id")
    return mapper.edge((otype, oid), relation, (stype, sid, srel), where, condition)


def _condition(key: dict[str, Any]) -> str:
    c = key.get("condition")
    return (c.get("name") or "condition") if isinstance(c, dict) else ("condition" if c else "")


def read_file(path: str | Path, mapper: Mapper) -> Iterator[Edge]:
    """Every tuple of a tuples file (formats: the module docstring), mapped."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise UserError(f"{p}: cannot read it: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a text file of tuples (not UTF-8)") from None
    suffix = p.suffix.lower()
    if suffix == ".csv":
        yield from _csv_rows(p, text, mapper)
        return
    for where, key in _keys(p, suffix, text, mapper):
        e = tuple_edge(
            key.get("user"), key.get("relation"), key.get("object"), where, mapper, _condition(key))
        if e is not None:
            yield e


def _keys(p: Path, suffix: str, text: str, mapper: Mapper) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, tuple key) of a JSON, JSON-lines or YAML file."""
    if suffix == ".jsonl":
        for i, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    yield f"{p}:{i}", _key(json.loads(line), f"{p}:{i}", mapper)
                except json.JSONDecodeError as e:
                    mapper.malformed(f"{p}:{i}", f"not JSON: {e.msg}")
        return
    doc = _document(p, suffix, text)
    items = doc.get("tuples") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise UserError(f"{p}: expected a list of tuples or {{\"tuples\": [...]}}")
    for i, item in enumerate(items, start=1):
        yield f"{p}: tuple {i}", _key(item, f"{p}: tuple {i}", mapper)


def _document(p: Path, suffix: str, text: str) -> Any:
    if suffix in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise UserError(f"{p}: not YAML: {str(e).splitlines()[0]}") from None
    if suffix != ".json":
        raise UserError(f"{p}: unknown tuples file type {suffix!r}; valid: .json, .jsonl, .yaml, .yml, .csv")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{p}: not JSON: {e.msg} at line {e.lineno}") from None


def _key(item: Any, where: str, mapper: Mapper) -> dict[str, Any]:
    """A tuple's key: the item itself, or its `key` (a Read response's tuple)."""
    if isinstance(item, dict) and isinstance(item.get("key"), dict):
        item = item["key"]
    if not isinstance(item, dict):
        mapper.malformed(where, "a tuple must be an object with user, relation and object")
    return item


def _csv_rows(p: Path, text: str, mapper: Mapper) -> Iterator[Edge]:
    rows = csv.DictReader(text.splitlines())
    missing = [c for c in CSV_COLUMNS if c not in (rows.fieldnames or [])]
    if missing:
        raise UserError(f"{p}:1: the header lacks {', '.join(missing)} (columns: {','.join(CSV_COLUMNS)})")
    for row in rows:
        where = f"{p}:{rows.line_num}"
        if None in row or any(row.get(c) is None for c in CSV_COLUMNS):
            mapper.malformed(where, f"{len([v for v in row.values() if v is not None])} fields, "
                                    f"the header has {len(rows.fieldnames or [])}")
        user = f"{row['user_type']}:{row['user_id']}"
        user += f"#{row['user_relation']}" if row["user_relation"] else ''
        if not (row["user_type"] and row["user_id"] and row["object_type"] and row["object_id"]):
            mapper.malformed(where, "empty user_type, user_id, object_type or object_id")
        e = tuple_edge(user, row["relation"], f"{row['object_type']}:{row['object_id']}", where, mapper,
                       row.get("condition_name") or "")
        if e is not None:
            yield e


# A live store ---------------------------------------------------------------------------------------------

def read_server(source: str | dict[str, Any], mapper: Mapper, store: str | None = None) -> Iterator[Edge]:
    """Every tuple of a live OpenFGA store, mapped: `source` is the adapter's endpoint dict or an
    http://PRESHARED_KEY@host:port URL; `store` its name or id (default: the adapter's store for the
    model)."""
    from authzbench.systems.openfga.adapter import OpenFGABackend

    endpoint = OpenFGABackend.endpoint_from_url(source) if isinstance(source, str) else source
    name = store or f"authzbench-{mapper.mapping.model}"
    with OpenFGABackend(endpoint, {"store": name, "model": mapper.mapping.model}) as b:
        if _ULID.match(name):
            b.client.set_store_id(name)
        elif not b.store_id:
            raise UserError(f"OpenFGA at {endpoint['url']}: no store named {name!r}")
        for i, key in enumerate(read_tuples(b), start=1):
            cond = (getattr(key.condition, "name", None) or "condition") if key.condition else ""
            e = tuple_edge(key.user, key.relation, key.object, f"openfga:Read#{i}", mapper, cond)
            if e is not None:
                yield e


def read_tuples(b: Any) -> Iterator[Any]:
    """Every TupleKey of the connected adapter's store, PAGE a request, following the continuation token."""
    from openfga_sdk.exceptions import ApiException
    from openfga_sdk.models.read_request_tuple_key import ReadRequestTupleKey

    token = None
    while True:
        options: dict[str, Any] = {"page_size": PAGE, "consistency": "HIGHER_CONSISTENCY"}
        if token:
            options["continuation_token"] = token
        try:
            resp = b.client.read(ReadRequestTupleKey(), options)
        except ApiException as e:
            raise BackendUnavailable(
                f"OpenFGA at {b.endpoint['url']}: Read answered {e.status} {e.reason}") from None
        for t in resp.tuples or []:
            yield t.key
        token = resp.continuation_token
        if not token:
            return


READERS = {"openfga": read_server, "openfga-file": read_file}  # format name -> reader(source, mapper)
