#!/usr/bin/env bash
# The GPU build: a CUDA-enabled Kokkos from Debian's source (scripts/build-kokkos.sh cuda),
# then all of strata, tests and benchmarks included, with nvcc for sm_90 (preset "cuda",
# build/cuda); arguments go to `cmake --build` (`--target strata test_mpi` builds less).
# This machine has no GPU: the build proves the code is device-correct (host-only code in
# a kernel fails to compile); scripts/device-check.sh runs it on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH   # nvcc_wrapper calls nvcc
scripts/build-kokkos.sh cuda >/dev/null
scripts/configure.sh cuda
cmake --build --preset cuda -j "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)" "$@"  # e.g. --target strata test_mpi; (nproc alone counts OMP_NUM_THREADS)
