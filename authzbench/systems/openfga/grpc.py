"""OpenFGA's Check over gRPC for `authzbench crosscheck` (issue 56): our adapter speaks HTTP/JSON (what
OpenFGA's SDKs use) and ghz speaks gRPC, so the cross-check also times our own gRPC call of the same request
to give the transport's cost a figure of its own.

No PyPI package ships OpenFGA's Python gRPC stubs: the message classes come from the server's reflection
through the shared helper (backends/grpc_reflection.reflected_pool), fetched once per client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SERVICE = "openfga.v1.OpenFGAService"


class OpenfgaGrpc:
    """One plaintext channel to OpenFGA's gRPC port; call(message) prepares one Check whose request is built
    beforehand (the bare call, as the breakdown's other driver calls), the key as bearer metadata."""

    def __init__(self, addr: str, key: str, timeout: float) -> None:
        import grpc
        from google.protobuf.message_factory import GetMessageClass

        from authzbench.backends.grpc_reflection import reflected_pool

        self.timeout = timeout
        self.metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {key}"),) if key else ()
        self.channel = grpc.insecure_channel(addr)
        try:
            d = reflected_pool(self.channel, self.metadata, timeout, (SERVICE,)).FindServiceByName(SERVICE) \
                .methods_by_name["Check"]
        except BaseException:
            self.channel.close()
            raise
        self.request, response = GetMessageClass(d.input_type), GetMessageClass(d.output_type)
        self.rpc = self.channel.unary_unary(
            f"/{SERVICE}/Check", request_serializer=self.request.SerializeToString,
            response_deserializer=response.FromString)

    def call(self, message: dict[str, Any]) -> Callable[[], bool]:
        """The adapter's check_message (protobuf JSON, what ghz sends) as a prebuilt request: a call returns
        the answer, so a wrong one can be seen."""
        from google.protobuf.json_format import ParseDict

        req = ParseDict(message, self.request())
        return lambda: bool(self.rpc(req, timeout=self.timeout, metadata=self.metadata).allowed)

    def close(self) -> None:
        self.channel.close()
