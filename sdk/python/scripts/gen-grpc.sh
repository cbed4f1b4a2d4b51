#!/usr/bin/env bash
# Regenerates the committed gRPC stubs of tenso.grpc from its .proto files (upstream 0.24 ships
# the .proto files only, although its README and tenso.serve.run_grpc import the stubs).
#
#   bash sdk/python/scripts/gen-grpc.sh [OUT_DIR]
#
# The stubs need grpcio and protobuf at least as new as the generator (pyproject.toml says so).
# Needs grpcio-tools (the version pinned in run-tests.sh: tests/test_grpc.py checks that the
# committed files are exactly what it generates). The .proto files are compiled as
# tenso/grpc/*.proto so that the service modules import their messages as
# `from tenso.grpc import ...`, not as top-level modules. OUT_DIR defaults to src/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$here/src}"
python="${PYTHON:-python3}"
mkdir -p "$out/tenso/grpc"
cd "$here/src"
"$python" -m grpc_tools.protoc -I . --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
    tenso/grpc/tenso_msg.proto tenso/grpc/benchmark_msg.proto
