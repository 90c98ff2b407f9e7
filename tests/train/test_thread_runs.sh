#!/usr/bin/env bash
# Whole runs with 1 and with 2 threads per rank give the same losses, gradient norms and
# parameters, bit for bit, on every layout: the GPT serial, data 2, 1D tensor 2, 2D tensor
# 2 x 2, a 1F1B pipeline of 2, context 2, experts 2, bf16 products (where the CPU has
# them), and the residual network solved by MGRIT over 2 ranks.
#   test_thread_runs.sh STRATA MPIEXEC
set -uo pipefail
strata=$(realpath "$1") mpiexec=$2
source "$(dirname "$0")/../support/test_lib.sh"
cd "$work" || exit 1

run='[run]
steps = 2
log_every = 1
checkpoint_every = 2
seed = 5'
cat > gpt.toml <<EOF
$run
[model]
n_layer = 2
n_embd = 64
n_head = 4
seq_len = 64
[data]
files = ["/usr/share/games/fortunes/*"]
batch_size = 8
EOF
cat > resnet.toml <<EOF
$run
[model]
kind = "resnet"
steps = 16
width = 32
[data]
kind = "images"
dir = "/usr/share/datasets/fashion-mnist"
batch_size = 32
[parallel]
pipeline = 2
schedule = "mgrit"
EOF

# the losses and gradient norms of metrics.csv, and every tensor of the last checkpoint
fingerprint() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "loss" || $i == "grad_norm") keep[i] = 1; next }
           { line = $1; for (i in keep) line = line " " $i; print line }' "$1/metrics.csv"
  /usr/bin/python3 - "$1"/checkpoints/ckpt_00000002.h5 <<'PY'
import hashlib, sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind in "fiu":
            print(name, hashlib.sha256(obj[()].tobytes()).hexdigest()[:16])
    f.visititems(visit)
PY
}

# same_bits NAME RANKS DECK [--set ...]: the run with 1 thread and with 2 threads per rank
same_bits() {
  local name=$1 np=$2 deck=$3
  shift 3
  for t in 1 2; do
    if ! timeout 120 "$mpiexec" -n "$np" "$strata" train "$deck" --threads "$t" --set run.out_dir=runs-$t \
        --set run.name="$name" "$@" >"$name-$t.log" 2>&1; then
      fail "$name with $t threads per rank exited non-zero"; tail -5 "$name-$t.log"; return
    fi
  done
  if ! grep -q "2 threads per rank (--threads)" "$name-2.log"; then
    fail "$name: the run summary does not say 2 threads per rank"; return
  fi
  fingerprint "runs-1/$name" >"$name-1.bits" && fingerprint "runs-2/$name" >"$name-2.bits"
  if [ "$(grep -c . "$name-1.bits")" -lt 5 ]; then
    fail "$name: nothing to compare"; cat "$name-1.bits"
  elif cmp -s "$name-1.bits" "$name-2.bits"; then
    ok "$name on $np ranks: 1 and 2 threads per rank, the same losses and $(grep -c / "$name-1.bits") tensors bit for bit"
  else
    fail "$name: 1 and 2 threads per rank differ"; diff "$name-1.bits" "$name-2.bits" | head -10
  fi
}

same_bits serial 1 gpt.toml
same_bits data2 2 gpt.toml --set parallel.data=2
same_bits tensor1d 2 gpt.toml --set parallel.tensor_cols=2
same_bits tensor2d 4 gpt.toml --set parallel.tensor_mode=2d --set parallel.tensor_rows=2 --set parallel.tensor_cols=2
same_bits pipeline 2 gpt.toml --set parallel.pipeline=2 --set parallel.schedule=1f1b --set parallel.micro_batches=2
same_bits context2 2 gpt.toml --set parallel.context=2
same_bits experts2 2 gpt.toml --set parallel.data=2 --set parallel.expert=2 --set model.moe_experts=4
if grep -q "avx512_bf16\|amx_bf16" /proc/cpuinfo; then
  same_bits bf16 1 gpt.toml --set model.precision=bf16
else
  echo "skip: bf16 (this CPU has no AVX512-BF16 or AMX)"
fi
same_bits resnet_mgrit 2 resnet.toml

finish
