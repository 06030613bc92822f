"""Schema files with `-- section: NAME` blocks of statements (systems/postgres/postgres.sql,
systems/clickhouse/clickhouse.sql)."""

from __future__ import annotations

import re
from pathlib import Path


def schema_sections(path: Path) -> dict[str, list[str]]:
    """`-- section: NAME` blocks of the schema file, each a list of statements (comments removed)."""
    body: dict[str, list[str]] = {}
    name = None
    for line in path.read_text().splitlines():
        m = re.match(r"--\s*section:\s*(\w+)", line)
        if m:
            name = m.group(1)
            body[name] = []
        elif name and not line.lstrip().startswith("--"):
            body[name].append(line)
    return {n: [s.strip() for s in re.split(r";\s*$", "\n".join(lines), flags=re.M) if s.strip()]
            for n, lines in body.items()}
