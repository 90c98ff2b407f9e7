#!/usr/bin/env bash
# llm.c's own loader and CPU forward on a strata model: exports CKPT as an llm.c model file
# (fp32), compiles a small harness against the llm.c checkout's train_gpt2.c (its
# gpt2_build_from_checkpoint and gpt2_forward, unchanged), and prints llm.c's mean loss of
# strata's validation batch 0 next to strata's (tests/tools/ckpt_batch_grads).
# Usage: bench/peers/llmc_loss.sh LLMC_DIR CKPT.h5 [BUILD_DIR]
# (llm.c is not part of strata: clone https://github.com/karpathy/llm.c where you have a network.)
set -euo pipefail
llmc=$(cd "$1" && pwd) ckpt=$2 build=${3:-build/release}
strata=$build/bin/strata
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$strata" export "$ckpt" "$work/model.bin" --format llmc
"$build/tests/ckpt_batch_grads" "$ckpt" "$work/grads.h5"
shape=$(/usr/bin/python3 - "$work" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1] + "/grads.h5", "r")
t, y = (np.array(f["batch/" + k]).astype(np.int32) for k in ("tokens", "targets"))
open(sys.argv[1] + "/batch.bin", "wb").write(t.tobytes() + y.tobytes())
print("strata mean loss %.8f" % f.attrs["loss"], file=sys.stderr)
print(*t.shape)
PY
)
cat > "$work/harness.c" <<'C'
#define main llmc_main
#include "train_gpt2.c"
#undef main
int main(int argc, char** argv) {
  GPT2 model;
  gpt2_build_from_checkpoint(&model, argv[1]);
  const int B = atoi(argv[3]), T = atoi(argv[4]);
  int* x = (int*)malloc(sizeof(int) * B * T);
  int* y = (int*)malloc(sizeof(int) * B * T);
  FILE* f = fopen(argv[2], "rb");
  if (!f || fread(x, sizeof(int), B * T, f) != (size_t)(B * T) || fread(y, sizeof(int), B * T, f) != (size_t)(B * T)) return 1;
  fclose(f);
  gpt2_forward(&model, x, y, B, T);
  printf("llm.c gpt2_forward mean loss %.8f\n", model.mean_loss);
  return 0;
}
C
gcc -O2 -I"$llmc" -o "$work/harness" "$work/harness.c" -lm
"$work/harness" "$work/model.bin" "$work/batch.bin" $shape | tail -1
