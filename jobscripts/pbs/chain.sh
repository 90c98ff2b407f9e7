#!/usr/bin/env bash
# Queue JOBS PBS training jobs that run one after another, each resuming from the
# checkpoint the one before it wrote (train.pbs passes --restart latest). Arguments go to
# `strata train` in every job (qsub -F); qsub options go in QSUB_ARGS:
#   JOBS=4 jobscripts/pbs/chain.sh
#   JOBS=3 DEPENDENCY=afterany QSUB_ARGS="-l walltime=04:00:00" jobscripts/pbs/chain.sh --set run.steps=50000
# Prints the job ids, one per line, the first job first.
set -euo pipefail

JOBS=${JOBS:-2}                     # jobs in the chain
DEPENDENCY=${DEPENDENCY:-afterok}   # afterok: only after an exit 0 (a failure ends the chain);
                                    # afterany: after any end (resume after a crashed node)
QSUB_ARGS=${QSUB_ARGS:-}            # extra qsub options for every job (word-split)
TEMPLATE=${TEMPLATE:-$(dirname "$0")/train.pbs}

previous=
for ((i = 1; i <= JOBS; i++)); do
  dependency=()
  [ -z "$previous" ] || dependency=(-W "depend=$DEPENDENCY:$previous")
  extra=()
  [ $# -eq 0 ] || extra=(-F "$*")
  # shellcheck disable=SC2086  # QSUB_ARGS is a list of options
  previous=$(qsub "${dependency[@]}" $QSUB_ARGS "${extra[@]}" "$TEMPLATE")
  echo "$previous"
done
