#!/usr/bin/env bash
# Installs missing Debian packages, builds Kokkos with OpenMP from Debian's source once per
# machine (scripts/build-kokkos.sh), then configures and builds strata (CMake preset
# "release", or the one named in $STRATA_PRESET). Idempotent: a second run only rebuilds
# what changed, and a configure that failed or was interrupted is run again (the build
# tree counts as configured only once its generator's Makefile exists).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
preset=${STRATA_PRESET:-release}
scripts/build-kokkos.sh openmp >/dev/null   # once per machine (strata's cache), then only linked
scripts/configure.sh "$preset"
cmake --build --preset "$preset" -j "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"  # (nproc alone counts OMP_NUM_THREADS)
