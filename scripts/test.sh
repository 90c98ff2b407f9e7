#!/usr/bin/env bash
# Set-up and the whole test suite: installs packages if missing, builds, runs CTest
# (unit tests, MPI tests at 1, 2 and 4 ranks, PyTorch reference checks, command-line
# error tests). Each test has a timeout, so a hang fails instead of stalling.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ctest --test-dir build/release --output-on-failure -j "$(nproc)" "$@"
