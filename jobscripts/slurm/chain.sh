#!/usr/bin/env bash
# Queue JOBS training jobs that run one after another, each resuming from the checkpoint
# the one before it wrote (train.sbatch passes --restart latest; the first starts fresh).
# Arguments go to `strata train` in every job; sbatch options go in SBATCH_ARGS:
#   JOBS=4 jobscripts/slurm/chain.sh
#   JOBS=3 DEPENDENCY=afterany SBATCH_ARGS="--time=04:00:00 --nodes=2" jobscripts/slurm/chain.sh --set run.steps=50000
# Prints the job ids, one per line, the first job first.
set -euo pipefail

JOBS=${JOBS:-2}                     # jobs in the chain
DEPENDENCY=${DEPENDENCY:-afterok}   # afterok: a job runs only if the one before ended with
                                    # exit 0 (finished, or stopped at the time limit with a
                                    # checkpoint); a failure cancels the rest of the chain.
                                    # afterany: run even after a failure (a crashed node),
                                    # resuming from the last good checkpoint.
SBATCH_ARGS=${SBATCH_ARGS:-}        # extra sbatch options for every job (word-split)
TEMPLATE=${TEMPLATE:-$(dirname "$0")/train.sbatch}

previous=
for ((i = 1; i <= JOBS; i++)); do
  dependency=()
  [ -z "$previous" ] || dependency=(--dependency="$DEPENDENCY:$previous")
  # shellcheck disable=SC2086  # SBATCH_ARGS is a list of options
  id=$(sbatch --parsable "${dependency[@]}" $SBATCH_ARGS "$TEMPLATE" "$@")
  previous=${id%%;*}
  echo "$previous"
done
