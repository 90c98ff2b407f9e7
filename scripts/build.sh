#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds strata (CMake preset
# "release", or the one named in $STRATA_PRESET). Idempotent: a second run only rebuilds
# what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
preset=${STRATA_PRESET:-release}
if [ ! -f "build/$preset/CMakeCache.txt" ]; then
  cmake --preset "$preset" >/dev/null
fi
cmake --build --preset "$preset" -j "$(nproc)"
