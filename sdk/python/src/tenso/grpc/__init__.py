"""gRPC messages and service stubs for tensors as Tenso packets, as upstream 0.24 declares them.

- ``tenso_msg_pb2`` / ``tenso_msg_pb2_grpc``: service ``tenso_grpc.TensorInference`` with
  ``Predict(PredictRequest{model_name, tensor_packet}) -> PredictResponse{result_packet, status}``;
  :func:`tenso.serve.run_grpc` serves it.
- ``benchmark_msg_pb2`` / ``benchmark_msg_pb2_grpc``: upstream's benchmark service.

The modules are generated from the ``.proto`` files next to them (scripts/gen-grpc.sh) and need
the ``grpc`` extra (grpcio, protobuf); importing this package alone needs neither.

Example (upstream's README)::

    from tenso.grpc import tenso_msg_pb2, tenso_msg_pb2_grpc
    import tenso

    def Predict(self, request, context):
        data = tenso.loads(request.tensor_packet)
        return tenso_msg_pb2.PredictResponse(result_packet=bytes(tenso.dumps(data * 2)))
"""
