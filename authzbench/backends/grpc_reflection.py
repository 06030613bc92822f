"""Message classes from a gRPC server's own reflection, for servers no PyPI package ships Python stubs for:
one reflection stream fetches the files defining the services called and all they import.

Imported by an adapter's connect() (or a tool), not at module level: grpcio is the backend's driver.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from authzbench.core.errors import BackendUnavailable


class ReflectionError(BackendUnavailable):
    """An error status the server's reflection answered with."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status} {message}"[:300])
        self.status, self.message = status, message


def reflected_pool(
    channel: grpc.Channel, metadata: tuple[tuple[str, str], ...], timeout: float, services: tuple[str, ...],
    error: Callable[[str, str], Exception] = ReflectionError) -> descriptor_pool.DescriptorPool:
    """A descriptor pool holding the files that define `services` (full names) and all they import, from
    one reflection stream (reflection is behind the preshared key too, hence the metadata); an error answer
    is raised as error(status name, message)."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    asks = [reflection_pb2.ServerReflectionRequest(file_containing_symbol=s) for s in services]
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for r in stub.ServerReflectionInfo(iter(asks), timeout=timeout, metadata=metadata):
        if r.HasField("error_response"):
            raise error(
                code_name(r.error_response.error_code), f"reflection: {r.error_response.error_message}")
        for raw in r.file_descriptor_response.file_descriptor_proto:
            f = descriptor_pb2.FileDescriptorProto.FromString(raw)
            files[f.name] = f
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str) -> None:  # a file after everything it imports
        if name not in added:
            added.add(name)
            for dep in files[name].dependency:
                add(dep)
            pool.Add(files[name])

    for name in files:
        add(name)
    return pool


def code_name(number: int) -> str:
    return next((c.name for c in grpc.StatusCode if c.value[0] == number), str(number))
