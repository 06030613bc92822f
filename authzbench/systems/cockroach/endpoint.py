"""The cockroach system's endpoint, read from the compose file (it has no adapter module to hold this)."""

from __future__ import annotations

from typing import Any


def endpoint_from_compose(c: Any) -> dict[str, Any]:
    """`c` is provision/compose.ComposeFile (not imported: this folder has no recipe side)."""
    return {"dsn": f"postgresql://root@127.0.0.1:{c.port('cockroach', 26257)}/defaultdb?sslmode=disable"}
