#!/usr/bin/env bash
# Run strata on a workstation with mpirun. Every knob is a variable here; override any of
# them from the environment, e.g.  DATA=4 jobscripts/workstation.sh  (4 data-parallel ranks)
# or  DECK=inputs/gpt-fortunes-2d.toml jobscripts/workstation.sh  (the deck's 2 x 2 grid).
set -euo pipefail

DECK=${DECK:-inputs/gpt-fortunes.toml}         # the deck to train
DATA=${DATA:-}                                 # if set: parallel.data (data-parallel replicas)
STRATA=${STRATA:-build/release/bin/strata}     # the executable (scripts/build.sh makes it)
MPIEXEC=${MPIEXEC:-mpiexec}                    # MPICH's Hydra launcher on Debian
THREADS_PER_RANK=${THREADS_PER_RANK:-}         # threads per rank (strata --threads); empty:
                                               # the machine's cores divided among the ranks

cd "$(dirname "$0")/.."
sets=()
[ -z "$DATA" ] || sets=(--set parallel.data="$DATA")
# ranks = data x pipeline x context x tensor_rows x tensor_cols of the deck (with DATA if set)
deck_ranks=$(awk -F= -v data="$DATA" '/^\[/{sec=$0} sec=="[parallel]" && $1~/^(data|pipeline|context|tensor_rows|tensor_cols) *$/ {k=$1; gsub(/ /,"",k); if (!(k=="data" && data!="")) n*=$2+0} BEGIN{n=1} END{if (data!="") n*=data; print n}' "$DECK")
RANKS=${RANKS:-$deck_ranks}                    # MPI ranks: the deck's layout unless overridden
threads=$(( ${THREADS_PER_RANK:-$(( $(nproc) / RANKS ))} ))
[ "$threads" -ge 1 ] || threads=1
# each rank on its own cores (Hydra's -bind-to core:N), one thread per core, side by side
export OMP_PLACES=${OMP_PLACES:-cores} OMP_PROC_BIND=${OMP_PROC_BIND:-close}
bind=()
if [ $(( RANKS * threads )) -gt "$(nproc)" ]; then
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}  # more threads than cores: waiting threads sleep
else
  bind=(-bind-to "core:$threads")
fi
exec "$MPIEXEC" "${bind[@]}" -n "$RANKS" "$STRATA" train "$DECK" --threads "$threads" "${sets[@]}" "$@"
