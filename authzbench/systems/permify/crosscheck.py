"""What `authzbench crosscheck` needs of permify: ghz sends the adapter's own Permission.Check request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TOOL = "ghz"
CLIENT = "grpcio, message classes from the server's reflection"
GRPC_CALL = "base.v1.Permission.Check"


def requests(backend: Any, inputs: list) -> list[dict[str, Any]]:
    from google.protobuf.json_format import MessageToDict

    m = backend.api.method("Permission.Check")
    return [MessageToDict(m.request(**backend.check_fields(*args))) for _, args, _ in inputs]


def driver_call(backend: Any, args: tuple) -> Callable[[], Any]:
    m = backend.api.method("Permission.Check")
    msg = m.request(**backend.check_fields(*args))
    return lambda: m.rpc(msg, timeout=backend.timeout, metadata=backend.api.metadata)
