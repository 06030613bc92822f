"""Permify's gRPC API with message classes built from the server's own reflection (no PyPI package ships
Permify's stubs): one reflection stream, at connect, fetches the files defining the services called (16 files,
~50 ms on a local v1.7.3), and the classes come from that pool. The adapter
(authzbench.systems.permify.adapter) and authzbench.systems.permify.tools.clients both call Permify through
`Api`.

Imported by the adapter's connect(), not at its module level: grpcio is the backend's driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message_factory import GetMessageClass

from authzbench.backends.grpc_reflection import code_name, reflected_pool
from authzbench.core.errors import BackendUnavailable, UserError

PACKAGE = "base.v1"
SERVICES = ("Permission", "Data", "Schema", "Tenancy", "Bundle")  # what the adapter calls, in base.v1
HEALTH = "grpc.health.v1.Health"  # the transport's round trip (the measurement tool's floor)


class PermifyError(BackendUnavailable):
    """A status Permify answered with: `status` is the gRPC code's name, `message` Permify's own
    (ERROR_CODE_...)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"permify: {status} {message}"[:300])
        self.status, self.message = status, message


def fetch_pool(channel: grpc.Channel, metadata: tuple[tuple[str, str], ...], timeout: float,
               services: tuple[str, ...]) -> descriptor_pool.DescriptorPool:
    """The pool of `services` from the server's reflection (backends/grpc_reflection.py); an error answer is a
    PermifyError."""
    return reflected_pool(channel, metadata, timeout, services, PermifyError)


_code_name = code_name


@dataclass(frozen=True)
class Method:
    rpc: Any  # grpc.UnaryUnaryMultiCallable
    request: Any  # the request message class
    descriptor: MethodDescriptor


class Api:
    """One channel to Permify's gRPC port; api("Permission.Check", **fields) sends the request built from
    `fields` (nested messages as dicts) with the key as `authorization: Bearer KEY` metadata and the
    timeout as its deadline, and maps a failure to the adapter's errors:
    UNAVAILABLE / DEADLINE_EXCEEDED -> BackendUnavailable "lost the connection to Permify at ADDR",
    UNAUTHENTICATED / PERMISSION_DENIED -> UserError "rejected the preshared key", any other -> PermifyError
    (status = the code's name, message = Permify's, e.g. ERROR_CODE_DEPTH_NOT_ENOUGH)."""

    def __init__(self, addr: str, key: str, timeout: float, tls: bool = False) -> None:
        self.addr, self.timeout = addr, timeout
        self.metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {key}"),) if key else ()
        self.channel = (grpc.secure_channel(addr, grpc.ssl_channel_credentials()) if tls
                        else grpc.insecure_channel(addr))
        self.methods: dict[str, Method] = {}
        try:
            self.pool = fetch_pool(self.channel, self.metadata, timeout,
                                   (*(f"{PACKAGE}.{s}" for s in SERVICES), HEALTH))
        except grpc.RpcError as e:
            self.channel.close()
            raise self.error(e, "reflection") from None
        except BaseException:
            self.channel.close()
            raise

    def method(self, name: str) -> Method:
        """"Service.Method" of base.v1, or a full "pkg.Service.Method" (grpc.health.v1.Health.Check)."""
        m = self.methods.get(name)
        if m is None:
            service, _, short = name.rpartition(".")
            full = service if "." in service else f"{PACKAGE}.{service}"
            d = self.pool.FindServiceByName(full).methods_by_name[short]
            req, resp = GetMessageClass(d.input_type), GetMessageClass(d.output_type)
            rpc = self.channel.unary_unary(f"/{full}/{short}", request_serializer=req.SerializeToString,
                                           response_deserializer=resp.FromString)
            m = self.methods[name] = Method(rpc, req, d)
        return m

    def enum(self, name: str, field: str, value: str) -> int:
        """The number of enum `value` in the response field `field` of method `name`."""
        return (self.method(name)
                .descriptor.output_type.fields_by_name[field]
                .enum_type.values_by_name[value]
                .number)

    def __call__(self, name: str, /, **fields: Any) -> Any:
        m = self.methods.get(name) or self.method(name)
        try:
            return m.rpc(m.request(**fields), timeout=self.timeout, metadata=self.metadata)
        except grpc.RpcError as e:
            raise self.error(e, name) from None

    def message(self, name: str, /, **fields: Any) -> Any:
        """Method `name`'s request message built from `fields`, to send (send) as often as needed."""
        return (self.methods.get(name) or self.method(name)).request(**fields)

    def send(self, name: str, message: Any) -> Any:
        """Method `name` called with a prebuilt request message."""
        m = self.methods.get(name) or self.method(name)
        try:
            return m.rpc(message, timeout=self.timeout, metadata=self.metadata)
        except grpc.RpcError as e:
            raise self.error(e, name) from None

    def error(self, e: grpc.RpcError, name: str) -> Exception:
        code: grpc.StatusCode = e.code()  # type: ignore[attr-defined]
        details = str(e.details() or "")  # type: ignore[attr-defined]
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return UserError(f"permify: Permify at {self.addr} rejected the preshared key")
        if code == grpc.StatusCode.UNAVAILABLE:
            return BackendUnavailable(f"permify: lost the connection to Permify at {self.addr}: "
                                      f"{code.name} ({details[:120]})")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return BackendUnavailable(f"permify: lost the connection to Permify at {self.addr}: "
                                      f"{code.name} ({name} unanswered after {self.timeout:g} s)")
        return PermifyError(code.name, details[:200])

    def close(self) -> None:
        self.channel.close()
