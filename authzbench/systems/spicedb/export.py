"""A SpiceDB graph read back as the model's Edges (issue 69): from a live server or from a relationships file.

Live server (`read_server`): the ExportBulkRelationships stream (one snapshot, fully consistent), or, on a
server without it (UNIMPLEMENTED), ReadRelationships per definition of its schema, paged at one snapshot.
The server is reached as the adapter reaches it (SpiceDBBackend: its endpoint dict or a
grpc://PRESHARED_KEY@host:port URL, grpcs:// for TLS).

Relationships file (`read_file`), one relationship a line, blank lines and `//` comments skipped:
  - the tuple form SpiceDB prints and its validation files hold: `document:1#viewer@user:7`,
    `group:2#member@group:5#membership` (a subject relation `...` is none);
  - what `zed relationship read` prints: `document:1 viewer user:7` (`group:5#membership` as the subject);
  - a validation / playground YAML file (`.yaml`, `.yml`): its `relationships:` block, in the tuple form.
A trailing caveat (`[name]`, `[name:{...}]`) or expiration (`[expiration:...]`) is refused as the mapping
refuses a caveat (the model has none). `zed backup create` writes a binary file: refused with one line saying
so (export it with `zed relationship read` per definition instead).

Each reader yields the mapped Edges (imports/mapping.py's Mapper: unmapped rows refused or counted there);
`where` names the file and line, or the API and the relationship's place in the stream.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.imports.edges import Edge
from authzbench.imports.mapping import Mapper

PAGE = 1_000  # relationships per export / read message (SpiceDB's default maximum for a read page)
_TUPLE = re.compile(
    r"^(?P<ot>[^\s:#@]+):(?P<oid>[^\s#@]+)#(?P<rel>[^\s#@:]+)@(?P<st>[^\s:#@]+):(?P<sid>[^\s#@\[]+)"
    r"(?:#(?P<srel>[^\s#@\[]+))?(?P<caveat>\[.*\])?$")
_BACKUP_MAGIC = b"Obj\x01"  # zed backup files are Avro object container files


def parse_line(line: str, where: str, mapper: Mapper) -> Edge | None:
    """One relationship in the tuple form or the `zed relationship read` form (module docstring)."""
    text = line.strip()
    if "@" not in text:  # zed's form: "resource relation subject"
        parts = text.split(None, 2)
        if len(parts) != 3:
            mapper.malformed(where, f"{text[:80]!r} is neither type:id#relation@type:id nor "
                                    "`type:id relation type:id`")
        text = f"{parts[0]}#{parts[1]}@{parts[2].replace(' ', '')}"
    m = _TUPLE.match(text)
    if m is None:
        mapper.malformed(where, f"{line.strip()[:80]!r} is not type:id#relation@type:id[#relation]")
    srel = "" if m["srel"] in (None, "...") else m["srel"]
    caveat = (m["caveat"] or "")[1:-1]
    return mapper.edge((m["ot"], m["oid"]), m["rel"], (m["st"], m["sid"], srel), where, caveat)


def read_file(path: str | Path, mapper: Mapper) -> Iterator[Edge]:
    """Every relationship of a relationships file (forms: the module docstring), mapped."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise UserError(f"{p}: cannot read it: {e.strerror}") from None
    if raw.startswith(_BACKUP_MAGIC):
        raise UserError(
            f"{p}: a `zed backup` file (binary): give the text of `zed relationship read` instead")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a text file of relationships (not UTF-8)") from None
    lines, first = _lines(p, text)
    for i, line in enumerate(lines, start=first):
        if line.strip() and not line.lstrip().startswith("//"):
            e = parse_line(line, f"{p}:{i}", mapper)
            if e is not None:
                yield e


def _lines(p: Path, text: str) -> tuple[list[str], int]:
    """The relationship lines and the file line the first one is on (a YAML file: its relationships block)."""
    if p.suffix not in (".yaml", ".yml"):
        return text.splitlines(), 1
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UserError(f"{p}: not YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("relationships"), str):
        raise UserError(f"{p}: a YAML file needs a `relationships:` block of one relationship a line")
    block = doc["relationships"].splitlines()
    # the block's first line in the file, so `where` names the file's own line numbers
    start = next((n for n, line in enumerate(text.splitlines(), 1) if block and block[0].strip()
                  and line.strip() == block[0].strip()), 1)
    return block, start


# A live server --------------------------------------------------------------------------------------------

def read_server(source: str | dict[str, Any], mapper: Mapper) -> Iterator[Edge]:
    """Every relationship a live SpiceDB holds, mapped: `source` is the adapter's endpoint dict or a
    grpc://PRESHARED_KEY@host:port URL. ExportBulkRelationships, else ReadRelationships per definition."""
    from authzbench.systems.spicedb.adapter import SpiceDBBackend

    endpoint = SpiceDBBackend.endpoint_from_url(source) if isinstance(source, str) else source
    with SpiceDBBackend(endpoint, {}) as b:
        try:
            yield from _mapped(export_relationships(b.client, b._md), "ExportBulkRelationships", mapper)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise _unavailable(endpoint, e) from None
            yield from _mapped(read_relationships(b.client, b._md), "ReadRelationships", mapper)


def _unavailable(endpoint: dict[str, Any], e: grpc.RpcError) -> BackendUnavailable:
    return BackendUnavailable(f"SpiceDB at {endpoint['addr']}: {e.code().name}: "
                              f"{((e.details() or '').splitlines() or [''])[0][:200]}")


def export_relationships(client: Any, md: tuple[tuple[str, str], ...]) -> Iterator[Any]:
    """The Relationship messages of one ExportBulkRelationships stream (one snapshot, fully consistent)."""
    from authzed.api.v1 import Consistency
    from authzed.api.v1.permission_service_pb2 import ExportBulkRelationshipsRequest

    req = ExportBulkRelationshipsRequest(consistency=Consistency(fully_consistent=True), optional_limit=PAGE)
    for resp in client.ExportBulkRelationships(req, timeout=3600, metadata=md):
        yield from resp.relationships


def read_relationships(client: Any, md: tuple[tuple[str, str], ...]) -> Iterator[Any]:
    """The Relationship messages of ReadRelationships over every definition of the schema, PAGE at a time;
    every page after the first reads the first page's snapshot (at_exact_snapshot), so the pages agree."""
    from authzed.api.v1 import Consistency, ReadRelationshipsRequest, ReadSchemaRequest, RelationshipFilter

    schema = client.ReadSchema(ReadSchemaRequest(), timeout=30, metadata=md).schema_text
    snapshot = None
    for t in re.findall(r"^\s*definition\s+([^\s{]+)", schema, re.M):
        cursor = None
        while True:
            consistency = (Consistency(at_exact_snapshot=snapshot) if snapshot is not None
                           else Consistency(fully_consistent=True))
            req = ReadRelationshipsRequest(
                consistency=consistency, optional_limit=PAGE, optional_cursor=cursor,
                relationship_filter=RelationshipFilter(resource_type=t))
            n = 0
            for resp in client.ReadRelationships(req, timeout=600, metadata=md):
                n += 1
                snapshot, cursor = snapshot or resp.read_at, resp.after_result_cursor
                yield resp.relationship
            if n < PAGE:
                break


def _mapped(rels: Iterator[Any], api: str, mapper: Mapper) -> Iterator[Edge]:
    for i, r in enumerate(rels, start=1):
        caveat = r.optional_caveat.caveat_name if r.HasField("optional_caveat") else ""
        if not caveat and r.HasField("optional_expires_at"):
            caveat = "expiration"
        s = r.subject
        srel = "" if r.subject.optional_relation in ("", "...") else s.optional_relation
        e = mapper.edge((r.resource.object_type, r.resource.object_id), r.relation,
                        (s.object.object_type, s.object.object_id, srel), f"spicedb:{api}#{i}", caveat)
        if e is not None:
            yield e


READERS = {"spicedb": read_server, "spicedb-file": read_file}  # format name -> reader(source, mapper)
