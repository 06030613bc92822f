"""The graph readers a system declares (`readers=`, its folder's export.py READERS) load without a server,
each format named once across the systems, each reader taking (source, mapper): what `authzbench import`
collects, so no module outside systems/ names a system's format."""

from __future__ import annotations

import inspect

from authzbench.systems import load, systems


def declared() -> dict[str, list[object]]:
    found: dict[str, list[object]] = {}
    for s in systems().values():
        for fmt, reader in (load(s.readers) if s.readers else {}).items():
            found.setdefault(fmt, []).append(reader)
    return found


def test_every_declared_format_is_one_reader_taking_a_source_and_a_mapper():
    found = declared()
    assert len(found) >= 4  # a live server and a file for each of the two Zanzibar engines that declare them
    for fmt, readers in found.items():
        assert len(readers) == 1, f"format {fmt!r} declared by {len(readers)} systems"
        params = list(inspect.signature(readers[0]).parameters)  # type: ignore[arg-type]
        assert params[:2] in (["source", "mapper"], ["path", "mapper"]), (fmt, params)
