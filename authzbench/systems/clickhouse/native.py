"""ClickHouse locally: the real engine embedded in-process (chdb), no server to start.

No registry ships a modern ClickHouse server (Debian's 18.16 is too old for clickhouse-connect);
PyPI's chdb is ClickHouse 26.x in-process, reached through clickhouse-connect's chdb:// DSN.
"""

from __future__ import annotations

import os
from pathlib import Path

from authzbench.core.console import say
from authzbench.core.errors import BackendUnavailable
from authzbench.provision.base import Deployment, StartContext


def start(ctx: StartContext) -> Deployment:
    try:
        import chdb  # noqa: F401 - only to fail early with the install hint
    except ImportError:
        raise BackendUnavailable(
            "clickhouse: the chdb engine is not installed: pip install 'authzbench[clickhouse]'") from None
    # options["data_dir"] keeps a loaded database across runs; by default it lives in the run dir.
    given = ctx.options.get("data_dir") or ctx.options.get("chdb_data_dir")
    data = Path(given).expanduser().resolve() if given else ctx.dir("chdb").resolve()
    data.mkdir(parents=True, exist_ok=True)
    say(f"clickhouse: embedded chdb engine, data in {data}")
    # The engine lives in the benchmark process itself, so the monitor samples this process.
    return Deployment(
        "clickhouse", "native", {"dsn": f"chdb://{data}"}, pids=[os.getpid()],
        notes=["embedded (chdb): the ClickHouse engine runs inside the benchmark process; CPU/RSS "
               "include the client"])
