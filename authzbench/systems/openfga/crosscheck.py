"""What `authzbench crosscheck` needs of openfga: ghz sends the adapter's own Check request over gRPC, while
the adapter speaks HTTP/JSON (what OpenFGA's SDKs use); so it also has a gRPC side of its own (GRPC_BACKEND:
the runner's phase with the adapter's check sent over gRPC, and grpc_call for the 1-worker breakdown), and the
transport's cost is a figure of the same kind as the others."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from authzbench.systems.openfga.adapter import OpenFGABackend

TOOL = "ghz"
CLIENT = "HTTP/JSON through openfga-sdk (ghz: the same Check over gRPC)"
GRPC_CALL = "openfga.v1.OpenFGAService.Check"
GRPC_BACKEND = f"{__name__}:GrpcBackend"


def requests(backend: Any, inputs: list) -> list[dict[str, Any]]:
    return [backend.check_message(*args) for _, args, _ in inputs]


def driver_call(backend: Any, args: tuple) -> Callable[[], Any]:
    return _post(backend, backend.check_message(*args))


def grpc_call(
    backend: Any, endpoint: dict[str, Any]
) -> tuple[Callable[[tuple], Callable[[], Any]], Callable[[], None]]:
    """Our own gRPC call of the request ghz sends, per input, and how to close its channel."""
    from authzbench.systems.openfga.grpc import OpenfgaGrpc

    client = OpenfgaGrpc(endpoint["grpc_addr"], endpoint.get("preshared_key") or "", backend.timeout)
    return (lambda a: client.call(backend.check_message(*a))), client.close


class GrpcBackend(OpenFGABackend):
    """The OpenFGA adapter with its check sent over gRPC: the same request (check_message) built per op as
    a protobuf message, on one channel per worker; everything else (store, model, lookups) as the adapter."""

    def connect(self) -> None:
        from authzbench.systems.openfga.grpc import OpenfgaGrpc

        super().connect()
        self.grpc = OpenfgaGrpc(
            self.endpoint["grpc_addr"], self.endpoint.get("preshared_key") or "", self.timeout)

    def check(self, user: int, perm: str, resource: int, mode: str | None = None) -> bool:
        g = self.grpc
        req = g.request(**self.check_message(user, perm, resource, mode))
        return bool(g.rpc(req, timeout=self.timeout, metadata=g.metadata).allowed)

    def close(self) -> None:
        grpc = getattr(self, "grpc", None)
        if grpc is not None:
            grpc.close()
        super().close()


def _post(backend: Any, message: dict[str, Any]) -> Callable[[], Any]:
    """The SDK's POST /stores/{id}/check as bytes already encoded, on a kept-alive urllib3 pool (the SDK's own
    HTTP library)."""
    import urllib3

    body = json.dumps({k: v for k, v in message.items() if k != "store_id"}).encode()
    url = f"{backend.endpoint['url']}/stores/{message['store_id']}/check"
    headers = {"Content-Type": "application/json",
               "Authorization": f"Bearer {backend.endpoint.get('preshared_key')}"}
    pool = urllib3.PoolManager(maxsize=1)
    return lambda: pool.request("POST", url, body=body, headers=headers, retries=False).data
