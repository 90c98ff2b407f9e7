#!/usr/bin/env bash
# Run strata on a workstation with mpirun. Every knob is a variable here; override any of
# them from the environment, e.g.  RANKS=4 DECK=inputs/bench-gpt-tiny.toml jobscripts/workstation.sh
set -euo pipefail

RANKS=${RANKS:-2}                              # MPI ranks (= parallel.data for data parallelism)
DECK=${DECK:-inputs/gpt-fortunes.toml}         # the deck to train
STRATA=${STRATA:-build/release/bin/strata}     # the executable (scripts/build.sh makes it)
MPIEXEC=${MPIEXEC:-mpiexec}                    # MPICH's Hydra launcher on Debian
THREADS_PER_RANK=${THREADS_PER_RANK:-1}        # BLAS/OpenMP threads per rank

cd "$(dirname "$0")/.."
# One BLAS thread per rank unless asked: Debian's OpenBLAS is the pthread build and would
# otherwise start one thread per core in every rank.
export OPENBLAS_NUM_THREADS=$THREADS_PER_RANK OMP_NUM_THREADS=$THREADS_PER_RANK
exec "$MPIEXEC" -n "$RANKS" "$STRATA" train "$DECK" --set parallel.data="$RANKS" "$@"
