#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU from the repository root:
#   scripts/device-check.sh [BUNDLE]      (BUNDLE: .device/strata-device.tar.xz, made here by
#                                           scripts/bundle-device.sh)
# 1. unit tests on the GPU (kernels and gradient checks in float and double; the MPI
#    equivalence tests at 1, 2 and 4 ranks sharing the GPU: data, 1D/2D tensor and
#    pipeline parallelism against serial, device buffers staged through the host);
# 2. the GPT of inputs/device-check.toml trained on the fortunes text (carried in the
#    bundle) on the GPU: 1 rank with NCCL collectives, 2 ranks data parallel with the MPI
#    backend, 4 ranks on a 2D 2x2 tensor grid, 2 pipeline stages (1F1B, 4 micro-batches;
#    and XPipe, which must run, not match), and 1 rank and 2D 2x2 with bf16 products;
# 3. each run's losses against the CPU run of the same deck made by bundle-device.sh:
#    fp32: step 1 within 1e-4 relative (same weights and batch, only the order of float
#    sums differs between cuBLAS/GPU reductions and OpenBLAS/CPU ones), every step within
#    2e-3; bf16 against the CPU's bf16 run (cuBLAS' tensor cores against oneDNN, each
#    rounding the operands to bf16 itself): 2e-3 and 2e-2; and the loss must fall;
# 4. the fused attention on the GPU against PyTorch's (tests/kernels/check_attention_torch.py,
#    where python3 has torch), and a GPT trained at T = 8192 (no T x T is stored);
# 5. tokens/s of each run, and the kernel benchmarks on the GPU.
# Writes its log to $OUT/device-check.log when OUT is set. Exit 0 only if every check passes.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-.device/strata-device.tar.xz}
log=${OUT:-/tmp}/device-check.log
exec > >(tee "$log") 2>&1
[ -f "$bundle" ] || { echo "device-check: error: no bundle at $bundle (run scripts/bundle-device.sh)"; exit 2; }
work=$(mktemp -d)
tar -xJf "$bundle" -C "$work"

# CUDA's own libraries come from the machine: the toolkit, or the wheels PyTorch brought.
cuda_dirs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import glob, site; print(" ".join(d for p in site.getsitepackages() for d in sorted(glob.glob(p + "/nvidia/*/lib"))))' 2>/dev/null); do
  [ -d "$d" ] && cuda_dirs="$cuda_dirs:$d"
done
export LD_LIBRARY_PATH="$work/lib${cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$work/bin:$PATH" UCX_MODULE_DIR="$work/lib/ucx" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mpi="$work/bin/mpiexec.hydra"
failures=0
step() { echo; echo "== $*"; }
check() {  # name command...
  local name=$1; shift
  if "$@"; then echo "PASS: $name"; else echo "FAIL: $name (exit $?)"; failures=$((failures + 1)); fi
}

step "machine"
nvidia-smi -L 2>/dev/null || echo "device-check: warning: nvidia-smi finds no GPU; the GPU steps below will fail"
missing=$(ldd "$work/bin/strata" | grep "not found" || true)
if [ -n "$missing" ]; then echo "device-check: error: libraries not found:"; echo "$missing"; exit 2; fi

step "unit tests on the GPU"
check "kernels" timeout 300 "$work/bin/test_kernels"
check "units (GPT gradient check, deck, data)" timeout 300 "$work/bin/test_units"
check "data parallel, 1 rank" timeout 300 "$mpi" -n 1 "$work/bin/test_mpi"
check "data parallel, 2 ranks sharing the GPU (MPI backend)" timeout 300 "$mpi" -n 2 "$work/bin/test_mpi"
check "data, tensor and pipeline parallel, 4 ranks sharing the GPU" timeout 600 "$mpi" -n 4 "$work/bin/test_mpi"

runs=${OUT:-$work}/runs
text=(--set "data.files=[\"$work/text/*\"]")
step "GPT training on the GPU: 1 rank, NCCL"
check "train, 1 rank, NCCL" timeout 300 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  --set parallel.comm_backend=nccl --set run.out_dir="$runs/nccl-1"
step "GPT training on the GPU: 2 ranks, MPI backend"
check "train, 2 ranks, MPI" timeout 300 "$mpi" -n 2 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  --set parallel.data=2 --set run.out_dir="$runs/mpi-2"

step "GPT training on the GPU: 2D tensor grid 2x2 (4 ranks) and 2 pipeline stages"
tp2d=(--set parallel.tensor_mode=2d --set parallel.tensor_rows=2 --set parallel.tensor_cols=2)
check "train, 2D 2x2" timeout 300 "$mpi" -n 4 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  "${tp2d[@]}" --set run.out_dir="$runs/tp2d-4"
check "train, pipeline 2" timeout 300 "$mpi" -n 2 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  --set parallel.pipeline=2 --set parallel.micro_batches=4 --set run.out_dir="$runs/pipe-2"
# XPipe is another optimiser (predicted weights): it must run; its losses are not the serial ones
check "train, xpipe 2" timeout 300 "$mpi" -n 2 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  --set parallel.pipeline=2 --set parallel.micro_batches=4 --set parallel.schedule=xpipe --set run.out_dir="$runs/xpipe-2"
# context parallelism (ring attention; its blocks staged through the host) and 1D with
# sequence parallelism, 2 ranks sharing the GPU
check "train, context 2" timeout 300 "$mpi" -n 2 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  --set parallel.context=2 --set run.out_dir="$runs/context-2"
check "train, 1D 2 sequence parallel" timeout 300 "$mpi" -n 2 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  --set parallel.tensor_cols=2 --set parallel.sequence_parallel=true --set run.out_dir="$runs/sp-2"

# a mixture of experts with its experts over 2 ranks sharing the GPU (MPI backend: NCCL
# refuses two ranks of one communicator on one GPU, so its grouped sends need 2 GPUs)
moe=(--set model.moe_experts=4 --set model.moe_every=2)
check "train, mixture of experts, expert 2" timeout 300 "$mpi" -n 2 "$work/bin/strata" train inputs/device-check.toml \
  "${text[@]}" "${moe[@]}" --set parallel.data=2 --set parallel.expert=2 --set run.out_dir="$runs/moe-2"

# ZeRO-3 over 2 ranks sharing the GPU: each unit's gather and sum on device memory,
# staged through the host by the MPI backend (the NCCL path needs 2 GPUs, as above)
check "train, ZeRO-3, data 2" timeout 300 "$mpi" -n 2 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  --set parallel.data=2 --set parallel.zero=3 --set run.out_dir="$runs/zero3-2"

step "GPT training on the GPU in bf16: 1 rank, and 2D 2x2"
check "train, bf16, 1 rank" timeout 300 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  --set model.precision=bf16 --set run.out_dir="$runs/bf16-1"
check "train, bf16, 2D 2x2" timeout 300 "$mpi" -n 4 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  "${tp2d[@]}" --set model.precision=bf16 --set run.out_dir="$runs/bf16-tp2d-4"

step "fused attention on the GPU: against PyTorch, and a long sequence"
if python3 -c "import torch" 2>/dev/null; then
  check "attention against PyTorch" timeout 300 python3 "$work/bin/check_attention_torch.py" "$work/bin/attention_io"
else
  echo "(python3 has no torch here: the PyTorch attention check is skipped)"
fi
check "train, T = 8192, bf16" timeout 300 "$work/bin/strata" train inputs/device-check.toml "${text[@]}" \
  --set model.seq_len=8192 --set data.batch_size=1 --set run.steps=3 --set model.precision=bf16 \
  --set run.out_dir="$runs/long-8192"

step "losses against the CPU run of the same deck"
for r in nccl-1 mpi-2 tp2d-4 pipe-2 context-2 sp-2 zero3-2; do
  check "losses $r vs CPU" scripts/compare-losses.sh "$work/cpu-reference/metrics-fp32.csv" \
    "$runs/$r/device-check/metrics.csv" 1e-4 2e-3
done
check "losses moe-2 vs CPU" scripts/compare-losses.sh "$work/cpu-reference/metrics-moe.csv" \
  "$runs/moe-2/device-check/metrics.csv" 1e-4 2e-3
for r in bf16-1 bf16-tp2d-4; do
  check "losses $r vs CPU bf16" scripts/compare-losses.sh "$work/cpu-reference/metrics-bf16.csv" \
    "$runs/$r/device-check/metrics.csv" 2e-3 2e-2
done
falls() {  # metrics.csv: the last loss at least 30% below the first
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "loss") c = i; next }
           NR == 2 { first = $c } { last = $c }
           END { printf "first loss %.4f, last %.4f\n", first, last; exit !(last < 0.7 * first) }' "$1"
}
for r in nccl-1 bf16-1; do check "loss falls, $r" falls "$runs/$r/device-check/metrics.csv"; done

step "throughput (last logged step)"
for csv in "$work"/cpu-reference/metrics-*.csv "$runs"/*/device-check/metrics.csv; do
  [ -f "$csv" ] && tail -1 "$csv" | awk -F, -v f="$csv" '{ printf "%-60s %10.0f tok/s %8.1f ms/step %8.1f GFLOP/s\n", f, $7, $6, $8 }'
done

step "kernel benchmarks on the GPU"
timeout 300 "$work/bin/bench_kernels" --benchmark_min_time=0.2 || echo "(benchmarks failed)"

echo
if [ $failures -eq 0 ]; then echo "device-check: all checks passed"; else echo "device-check: $failures checks failed"; fi
rm -rf "$work"
exit $((failures > 0))
