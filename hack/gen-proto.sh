#!/usr/bin/env bash
# Regenerate the Python stubs of the wire contract (proto/federation/v1/*.proto).
#
# Output lands under OUT/federation/v1/ (OUT defaults to the repo root) so the modules
# import as `from federation.v1 import jobs_pb2, jobs_pb2_grpc`: protoc runs with
# `-I proto`, which makes every generated import read `from federation.v1 import ...`.
# Produces *_pb2.py, *_pb2_grpc.py and mypy-protobuf stubs *_pb2.pyi, *_pb2_grpc.pyi.
# The output depends only on the .proto files and the pinned tool versions, so
# tests/unit/test_proto_fresh.py can regenerate into a temp dir and compare byte for byte.
#
# Usage: hack/gen-proto.sh [OUT]      (PYTHON=... to choose the interpreter)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT}"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
BIN="$(dirname "$(command -v "$PYTHON")")"

plugin() {  # the plugin beside the interpreter (venv), else on PATH
  if [[ -x "$BIN/$1" ]]; then echo "$BIN/$1"; else command -v "$1"; fi
}
MYPY_PLUGIN="$(plugin protoc-gen-mypy)"
MYPY_GRPC_PLUGIN="$(plugin protoc-gen-mypy_grpc)"
WKT="$("$PYTHON" -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')"

DEST="$OUT/federation/v1"
mkdir -p "$DEST"
[[ -f "$DEST/__init__.py" ]] || : > "$DEST/__init__.py"
# Drop stale output so a removed .proto leaves nothing behind.
rm -f "$DEST"/*_pb2.py "$DEST"/*_pb2.pyi "$DEST"/*_pb2_grpc.py "$DEST"/*_pb2_grpc.pyi

cd "$ROOT/proto"
mapfile -t PROTOS < <(LC_ALL=C ls federation/v1/*.proto | LC_ALL=C sort)
"$PYTHON" -m grpc_tools.protoc \
  -I . -I "$WKT" \
  --plugin=protoc-gen-mypy="$MYPY_PLUGIN" \
  --plugin=protoc-gen-mypy_grpc="$MYPY_GRPC_PLUGIN" \
  --python_out="$OUT" \
  --grpc_python_out="$OUT" \
  --mypy_out="$OUT" \
  --mypy_grpc_out="$OUT" \
  "${PROTOS[@]}"
