#!/usr/bin/env bash
# Whole runs with 1, 2 and 4 threads per rank give the same losses, gradient norms and
# parameters, bit for bit, on every layout: the GPT serial, data 2, 1D tensor 2, 2D tensor
# 2 x 2, 3D tensor 2 x 1 x 2, a 1F1B, a ZB-H1 and an XPipe pipeline of 2, context 2,
# experts 2, ZeRO-2 and ZeRO-3 over 2 ranks, bf16 products (where the CPU has them), the
# residual network and the GPT solved by MGRIT over 2 ranks. With the BLAS kernels the
# machine picks by itself (no OPENBLAS_CORETYPE), and each run's summary must state the
# thread count it was given.
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

# same_bits NAME RANKS DECK [--set ...]: the run with 1, 2 and 4 threads per rank
same_bits() {
  local name=$1 np=$2 deck=$3 t
  shift 3
  for t in 1 2 4; do
    if ! timeout 120 "$mpiexec" -n "$np" "$strata" train "$deck" --threads "$t" --set run.out_dir=runs-$t \
        --set run.name="$name" "$@" >"$name-$t.log" 2>&1; then
      fail "$name with $t threads per rank exited non-zero"; tail -5 "$name-$t.log"; return
    fi
    # the count the run took (Kokkos' pool, which OpenBLAS and oneDNN share), as its summary says
    if ! grep -Eq "^strata: $t threads? per rank \(--threads\)" "$name-$t.log"; then
      fail "$name: the run summary does not say $t threads per rank"; grep -i thread "$name-$t.log" | head -3; return
    fi
    # the tests' OMP_WAIT_POLICY=passive is named as a cost where the rank's threads have cores of their own
    if [ "${OMP_WAIT_POLICY:-}" = passive ] && [ "$t" -gt 1 ] && [ $((np * t)) -le "$(env -u OMP_NUM_THREADS nproc)" ] &&
        ! grep -q "OMP_WAIT_POLICY=passive on cores of its own" "$name-$t.log"; then
      fail "$name: $t threads on free cores under OMP_WAIT_POLICY=passive, and the summary does not say what it costs"
      grep -i "per rank" "$name-$t.log" | head -2; return
    fi
    fingerprint "runs-$t/$name" >"$name-$t.bits"
  done
  if [ "$(grep -c . "$name-1.bits")" -lt 5 ]; then
    fail "$name: nothing to compare"; cat "$name-1.bits"
  elif cmp -s "$name-1.bits" "$name-2.bits" && cmp -s "$name-1.bits" "$name-4.bits"; then
    ok "$name on $np ranks: 1, 2 and 4 threads per rank, the same losses and $(grep -c / "$name-1.bits") tensors bit for bit"
  else
    fail "$name: 1, 2 and 4 threads per rank differ"; diff "$name-1.bits" "$name-2.bits" | head -6
    diff "$name-1.bits" "$name-4.bits" | head -6
  fi
}

same_bits serial 1 gpt.toml
same_bits data2 2 gpt.toml --set parallel.data=2
same_bits tensor1d 2 gpt.toml --set parallel.tensor_cols=2
same_bits tensor2d 4 gpt.toml --set parallel.tensor_mode=2d --set parallel.tensor_rows=2 --set parallel.tensor_cols=2
same_bits pipeline 2 gpt.toml --set parallel.pipeline=2 --set parallel.schedule=1f1b --set parallel.micro_batches=2
same_bits context2 2 gpt.toml --set parallel.context=2
same_bits experts2 2 gpt.toml --set parallel.data=2 --set parallel.expert=2 --set model.moe_experts=4
same_bits tensor3d 4 gpt.toml --set parallel.tensor_mode=3d --set parallel.tensor_x=2 --set parallel.tensor_depth=2
same_bits zb_h1 2 gpt.toml --set parallel.pipeline=2 --set parallel.schedule=zb-h1 --set parallel.micro_batches=2
same_bits xpipe 2 gpt.toml --set parallel.pipeline=2 --set parallel.schedule=xpipe --set parallel.micro_batches=2
same_bits zero2 2 gpt.toml --set parallel.data=2 --set parallel.zero=2
same_bits zero3 2 gpt.toml --set parallel.data=2 --set parallel.zero=3
same_bits gpt_mgrit 2 gpt.toml --set model.n_layer=4 --set parallel.pipeline=2 --set parallel.schedule=mgrit \
  --set layerpar.levels=2 --set layerpar.cfactor=2
if grep -q "avx512_bf16\|amx_bf16" /proc/cpuinfo; then
  # with a mixture: its experts' products too (their rows vary: operands rounded on the rank's threads)
  same_bits bf16 1 gpt.toml --set model.precision=bf16 --set model.moe_experts=4
else
  echo "skip: bf16 (this CPU has no AVX512-BF16 or AMX)"
fi
same_bits resnet_mgrit 2 resnet.toml

finish
