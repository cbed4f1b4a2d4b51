from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class PredictRequest(_message.Message):
    __slots__ = ("model_name", "tensor_packet")
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PACKET_FIELD_NUMBER: _ClassVar[int]
    model_name: str
    tensor_packet: bytes
    def __init__(self, model_name: _Optional[str] = ..., tensor_packet: _Optional[bytes] = ...) -> None: ...

class PredictResponse(_message.Message):
    __slots__ = ("result_packet", "status")
    RESULT_PACKET_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    result_packet: bytes
    status: str
    def __init__(self, result_packet: _Optional[bytes] = ..., status: _Optional[str] = ...) -> None: ...
