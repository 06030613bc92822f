"""What `authzbench crosscheck` needs of spicedb-pg: ghz sends the adapter's own CheckPermission request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TOOL = "ghz"
CLIENT = "grpcio with the authzed package's stubs"
GRPC_CALL = "authzed.api.v1.PermissionsService.CheckPermission"


def requests(backend: Any, inputs: list) -> list[dict[str, Any]]:
    from google.protobuf.json_format import MessageToDict

    return [MessageToDict(backend.check_request(*args)) for _, args, _ in inputs]


def driver_call(backend: Any, args: tuple) -> Callable[[], Any]:
    req = backend.check_request(*args)
    return lambda: backend.client.CheckPermission(req, timeout=backend.timeout, metadata=backend._md)
