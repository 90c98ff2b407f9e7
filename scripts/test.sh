#!/usr/bin/env bash
# Set-up and the whole test suite: installs packages if missing, builds, runs CTest
# (unit tests, MPI tests at 1, 2 and 4 ranks, PyTorch reference checks, command-line
# error tests), then compiles the GPU build (CUDA + NCCL, sm_90) of the library, the
# executable and the tests so that code which is not device-correct fails here. Each
# test has a timeout, so a hang fails instead of stalling. STRATA_SKIP_CUDA=1 skips the
# GPU build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# the machine's processors: nproc counts OMP_NUM_THREADS, exported below (it gave CTest and the
# GPU build -j 1 until 2026-12-06)
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ctest_log=build/ctest.log
start=$(date +%s)
set +e
ctest --test-dir build/release --output-on-failure -j "$jobs" "$@" 2>&1 | tee "$ctest_log"
rc=${PIPESTATUS[0]}
set -e
# the total and the five slowest tests, from CTest's own lines ("... Passed   12.34 sec")
echo "test.sh: CTest took $(( $(date +%s) - start )) s; the slowest tests:"
sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/p' "$ctest_log" | sort -rn | head -5 |
  awk '{ printf "  %8.1f s  %s\n", $1, $2 }'
[ "$rc" -eq 0 ] || exit "$rc"

if [ "${STRATA_SKIP_CUDA:-0}" = 1 ]; then
  echo "test.sh: GPU build skipped (STRATA_SKIP_CUDA=1)"
elif [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
  echo "test.sh: no CUDA toolkit at ${CUDA_HOME:-/usr/local/cuda}: GPU build skipped"
else
  start=$(date +%s)
  # the library, the executable and every test program; benchmarks and reference tools
  # are compiled for the device when scripts/bundle-device.sh makes the full GPU build
  scripts/build-cuda.sh --target strata test_kernels test_units test_mpi > build/cuda-build.log 2>&1 ||
    { tail -50 build/cuda-build.log; echo "test.sh: the GPU build failed"; exit 1; }
  echo "test.sh: GPU build (Kokkos CUDA + strata and its tests, nvcc sm_90) compiled in $(( $(date +%s) - start )) s"
fi
