#!/usr/bin/env bash
# Set-up and the default example in one command: installs packages if missing, builds,
# and trains inputs/gpt-fortunes.toml on 2 MPI ranks (data parallel), printing progress.
# Extra arguments go to strata, e.g.  scripts/run-example.sh --set run.steps=50
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
exec mpiexec -n 2 build/release/bin/strata train inputs/gpt-fortunes.toml "$@"
