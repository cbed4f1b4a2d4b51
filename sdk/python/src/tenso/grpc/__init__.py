"""gRPC messages and service stubs for tensors as Tenso packets, as upstream 0.24 declares them.

- ``tenso_msg_pb2`` / ``tenso_msg_pb2_grpc``: service ``tenso_grpc.TensorInference`` with
  ``Predict(PredictRequest{model_name, tensor_packet}) -> PredictResponse{result_packet, status}``;
  :func:`tenso.serve.run_grpc` serves it.
- ``benchmark_msg_pb2`` / ``benchmark_msg_pb2_grpc``: upstream's benchmark service.
- :func:`request_tensor`: a request's packet decoded within the limits a server should apply
  to a client's bytes (not in upstream).

The modules are generated from the ``.proto`` files next to them (scripts/gen-grpc.sh) and need
the ``grpc`` extra (grpcio, protobuf); importing this package alone needs neither.

Example (upstream's README, with :func:`request_tensor` in place of ``tenso.loads``)::

    from tenso.grpc import request_tensor, tenso_msg_pb2, tenso_msg_pb2_grpc
    import tenso

    def Predict(self, request, context):
        data = request_tensor(request, context)
        return tenso_msg_pb2.PredictResponse(result_packet=bytes(tenso.dumps(data * 2)))

What a client can cost: grpcio holds the whole message (``max_message_length``, 256 MiB by
default in :func:`tenso.serve.grpc_server`) and the arrays are views of it; decoding adds LZ4
bodies of at most ``UNTRUSTED_MAX_INFLATION`` (16) times the packet (counted as at least 4 MiB)
and at most
``UNTRUSTED_MAX_DECODED_BYTES`` (2 GiB) in all. Each request is decoded on its own worker thread,
with the GIL released for packets of 64 KiB or more, so a large decode does not stall the
others. ``tenso.loads(request.tensor_packet)``, as upstream writes it, has no such bounds: a
7 KiB LZ4 packet may inflate to gigabytes.
"""

from typing import Any, Optional

from ..options import DecodeOptions

__all__ = ["request_tensor"]


def request_tensor(request: Any, context: Any, options: Optional[DecodeOptions] = None) -> Any:
    """
    The object in ``request.tensor_packet`` (a ``PredictRequest``), decoded as
    :func:`tenso.fastapi.get_tenso_data` decodes a request body: zero-copy views of the message,
    LZ4 bodies within ``max_inflation`` x the packet, counted as at least 4 MiB (default 16), and
    all decoding within
    ``max_decoded_bytes`` (default 2 GiB). Not in upstream.

    A packet that cannot be decoded ends the RPC through ``context.abort``:
    ``RESOURCE_EXHAUSTED`` when it is over a limit, ``INVALID_ARGUMENT`` when it is malformed
    or truncated; the details start with ``Invalid Tenso packet:``.

    Parameters
    ----------
    request : PredictRequest
        The request (any message with a ``tensor_packet`` bytes field).
    context : grpc.ServicerContext
        The RPC's context.
    options : DecodeOptions, optional
        Decode limits; ``max_decoded_bytes`` and ``max_inflation`` left at 0 take the defaults.
    """
    import grpc

    from ..core import loads
    from ..errors import TensoMemoryError, _over_size_limit
    from ..options import _untrusted

    packet = request.tensor_packet
    try:
        # align=False: views at whatever address the message holds them (no aligning copy).
        return loads(packet, align=False, options=_untrusted(options, max(len(packet), 1)))
    except (ValueError, EOFError, TypeError, TensoMemoryError) as e:
        code = grpc.StatusCode.RESOURCE_EXHAUSTED if _over_size_limit(e) else grpc.StatusCode.INVALID_ARGUMENT
        context.abort(code, f"Invalid Tenso packet: {e}")
        raise  # abort raises; this is never reached
