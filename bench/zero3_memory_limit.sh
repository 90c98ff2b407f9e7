#!/usr/bin/env bash
# ZeRO-3 under a real per-rank memory limit. A GPT whose unsharded state (parameters,
# gradients, AdamW moments: 4 x 4 bytes a parameter) is larger than the limit runs on 2
# ranks, each rank's data segment limited with `prlimit --data` (the kernel refuses its
# private allocations past LIMIT_MIB: malloc returns nothing, Kokkos throws): without ZeRO
# the job ends with strata's one-line out-of-memory error, with ZeRO-3 it trains.
# Usage: bench/zero3_memory_limit.sh [STRATA (build/release/bin/strata)] [LIMIT_MIB (600)]
set -uo pipefail
cd "$(dirname "$0")/.."
strata=${1:-build/release/bin/strata} limit=${2:-600}
export OMP_WAIT_POLICY=passive
# OpenBLAS with more threads reserves its buffers at load and loops forever if the limit
# refuses them (before strata's main: README, exit codes)
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
model=(--set model.n_layer=12 --set model.n_embd=512 --set model.n_head=8 --set model.seq_len=128
       --set data.batch_size=2 --set run.steps=3 --set run.log_every=1 --set parallel.data=2 --threads 1)
for zero in 0 3; do
  echo "--- parallel.zero = $zero, each rank limited to $limit MiB of data segment"
  mpiexec -n 2 prlimit --data=$((limit << 20)) "$strata" train inputs/bench-gpt-small.toml "${model[@]}" \
    --set parallel.zero=$zero --set run.out_dir="\"$out\"" --set run.name=zero$zero > "$out/zero$zero.log" 2>&1
  rc=$?
  grep -E "^strata: [0-9]+ ranks|^step +3/|^memory|strata: error" "$out/zero$zero.log" | head -4
  echo "exit $rc"
done
