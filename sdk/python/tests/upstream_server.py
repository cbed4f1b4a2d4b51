"""Runs under the pinned upstream tenso (0.24.0) venv, in its own process: the upstream package
has the same import name as ours, so the two can never share an interpreter.

Protocol: one JSON request per stdin line, one JSON reply per stdout line.
  {"op": "version"}                                   -> {"ok": true, "version": "0.24.0"}
  {"op": "loads", "packet": HEX}                      -> {"ok": true, "value": DESC}
  {"op": "dumps", "value": DESC, "options": {...}}    -> {"ok": true, "packet": HEX}
  {"op": "info", "packet": HEX}                       -> {"ok": true, "info": {...}}
  {"op": "ragged_loads", "packet": HEX}               -> {"ok": true, "value": DESC}
  {"op": "quantize", "input": DESC, "dtype", "scheme", "group_size", "axis"}
                                                      -> {"ok": true, "value": DESC, "dequant": HEX}
  {"op": "stream", "packets": [HEX...]}               -> decodes the concatenation with
                                                         read_stream: {"ok": true, "values": [...]}
  {"op": "shm_get", "name": NAME}                    -> attaches with TensoShm, decodes, closes:
                                                         {"ok": true, "value": DESC}
  {"op": "shm_create_from", "name", "value": DESC, "options": {...}}
                                                      -> TensoShm.create_from, kept open until
                                                         shm_release: {"ok": true, "size": N}
  {"op": "shm_release", "name": NAME}                 -> closes and unlinks it: {"ok": true}
Failures: {"ok": false, "error": "ValueError", "message": "..."}.
"""

import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import interop_codec as codec  # noqa: E402
import tenso  # noqa: E402  (upstream's)


def info_json(info):
    out = {}
    for k, v in info.items():
        if isinstance(v, np.dtype):
            v = v.name
        elif isinstance(v, tuple):
            v = list(v)
        out[k] = v
    return out


# Segments this process created, kept open until released (SharedMemory's resource tracker would
# unlink them when this process exits anyway).
_segments = {}


def handle(req):
    op = req["op"]
    if op == "version":
        return {"version": tenso.__version__, "file": tenso.__file__}
    if op == "loads":
        return {"value": codec.loads_with(tenso, bytes.fromhex(req["packet"]))}
    if op == "ragged_loads":
        return {"value": codec.describe(tenso.RaggedArray.loads(bytes.fromhex(req["packet"])))}
    if op == "dumps":
        return {"packet": codec.dumps_with(tenso, req["value"], req.get("options", {})).hex()}
    if op == "info":
        return {"info": info_json(tenso.get_packet_info(bytes.fromhex(req["packet"])))}
    if op == "quantize":
        x = codec.build(req["input"], tenso)
        q = tenso.QuantizedTensor.quantize(
            x, req["dtype"], req["scheme"], group_size=req["group_size"], axis=req["axis"]
        )
        return {"value": codec.describe(q), "dequant": q.dequantize().tobytes().hex()}
    if op == "stream":
        src = io.BytesIO(b"".join(bytes.fromhex(p) for p in req["packets"]))
        values = []
        while True:
            obj = tenso.read_stream(src)
            if obj is None:
                break
            values.append(codec.describe(obj))
        return {"values": values}
    if op == "shm_get":
        with tenso.TensoShm(req["name"]) as shm:
            # Python 3.11's SharedMemory registers segments it merely attaches to for unlinking
            # at exit: the segment is the caller's, so take it off the tracker's list.
            from multiprocessing import resource_tracker

            resource_tracker.unregister(shm._shm._name, "shared_memory")
            value = codec.describe(shm.get())
        return {"value": value}
    if op == "shm_create_from":
        obj = codec.build(req["value"], tenso)
        shm = tenso.TensoShm.create_from(req["name"], obj, **req.get("options", {}))
        _segments[req["name"]] = shm
        return {"size": shm.size}
    if op == "shm_release":
        shm = _segments.pop(req["name"])
        shm.close()
        shm.unlink()
        return {}
    raise ValueError(f"unknown op {op!r}")


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = {"ok": True, **handle(json.loads(line))}
        except BaseException as e:  # report every failure to the caller, keep serving
            reply = {"ok": False, "error": type(e).__name__, "message": str(e)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
