#!/usr/bin/env bash
# Fuzzes the readers of other programs' model files (safetensors' header and its JSON,
# llm.c's header; io/) with libFuzzer and AddressSanitizer for SECONDS (default 300),
# starting from a small safetensors file and an llm.c header made here. Needs clang and
# its runtime (Debian: clang, libclang-rt-14-dev); not part of CTest. A finding is written
# to build/fuzz-model-files/crash-* (or timeout-*, oom-*); the exit code is libFuzzer's
# (0: nothing found). Usage: tests/io/fuzz-model-files.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-300}
out=build/fuzz-model-files
mkdir -p "$out/corpus"
/usr/bin/python3 - "$out/corpus" <<'PY'
import json, struct, sys
d = sys.argv[1]
h = {"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
     "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}}
t = json.dumps(h).encode()
open(d + "/seed.safetensors", "wb").write(struct.pack("<Q", len(t)) + t + bytes(22))
w = [20240326, 3, 4, 8, 1, 2, 4, 8] + [0] * 248
n = 8 * 4 + 4 * 4 + 4 + 4 + 4 * 12 + 12 + 16 * 4 + 16 + 16 * 4 + 4 + 4 + 4 + 4 + 4 + 4
open(d + "/seed.bin", "wb").write(struct.pack("<256i", *w) + bytes(4 * n))
PY
clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address -I. -Isrc tests/io/fuzz_model_files.cpp io/json_text.cpp \
  io/stored_tensor.cpp io/safetensors.cpp io/llmc_model_file.cpp -o "$out/fuzz_model_files"
cd "$out"
exec ./fuzz_model_files -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 -timeout=5 corpus
