#!/usr/bin/env bash
# What strata's own threading of the fp32 products costs against OpenBLAS's (docs/benchmarks.md,
# "Products threaded by strata"): bench/limit on a deck with 1 and 2 threads, strata's blocks
# and OpenBLAS's threads (STRATA_GEMM_THREADS=openblas) in turn, each twice.
# Usage: bench/threaded_products.sh [BUILD_DIR] [DECK]   (from the repository's root)
set -euo pipefail
build=${1:-build/release}
deck=${2:-inputs/bench-gpt-small.toml}
for t in 1 2; do
  for mode in strata openblas strata openblas; do
    echo "== $t thread(s), products threaded by $mode"
    STRATA_GEMM_THREADS=$mode OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t mpiexec -n 1 "$build/bench/limit" \
      --threads "$t" --steps 2 --rounds 1 "$deck" 2>&1 | grep -E '^\| |thread\(s\)'
  done
done
