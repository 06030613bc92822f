"""ClickHouse locally: the real engine embedded in-process (chdb), no server to start.

No registry ships a modern ClickHouse server (Debian's 18.16 is too old for clickhouse-connect);
PyPI's chdb is ClickHouse 26.x in-process, reached through clickhouse-connect's chdb:// DSN.
"""

from __future__ import annotations

import os

from authzbench.errors import BackendUnavailable
from authzbench.provision.base import Deployment, StartContext, say


def start(ctx: StartContext) -> Deployment:
    try:
        import chdb  # noqa: F401 - only to fail early with the install hint
    except ImportError:
        raise BackendUnavailable("clickhouse: the chdb engine is not installed: pip install 'authzbench[chdb]'") \
            from None
    data = ctx.options.get("chdb_data_dir") or str(ctx.dir("chdb"))
    say(f"clickhouse: embedded chdb engine, data in {data}")
    # The engine lives in the benchmark process itself, so the monitor samples this process.
    return Deployment("clickhouse", "native", {"dsn": f"chdb://{os.path.abspath(data)}"}, pids=[os.getpid()],
                      notes=["embedded (chdb): the ClickHouse engine runs inside the benchmark process; CPU/RSS "
                             "include the client"])
