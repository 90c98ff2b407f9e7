#!/usr/bin/env bash
# Set-up and an example in one command: installs packages if missing, builds, and trains
# a deck (default inputs/gpt-fortunes.toml, data parallel on 2 ranks) on as many MPI ranks
# as its [parallel] section asks for, printing progress. Extra arguments go to strata:
#   scripts/run-example.sh                                 # the default deck
#   scripts/run-example.sh inputs/gpt-fortunes-2d.toml     # 2D tensor parallel, 4 ranks
#   scripts/run-example.sh inputs/gpt-fortunes-spm.toml    # subword tokens (tokenizes first, once)
#   scripts/run-example.sh inputs/gpt-fortunes-moe.toml    # mixtures of experts over 2 ranks (same shards)
#   scripts/run-example.sh --set run.steps=50
set -euo pipefail
cd "$(dirname "$0")/.."
deck=inputs/gpt-fortunes.toml
if [ $# -gt 0 ] && [[ $1 == *.toml ]]; then
  deck=$1
  shift
fi
scripts/build.sh
# ranks = data x pipeline x tensor_rows x tensor_cols of the deck's [parallel] section
np=$(awk -F= '/^\[/{sec=$0} sec=="[parallel]" && $1~/^(data|pipeline|context|tensor_rows|tensor_cols) *$/ {n*=$2+0} BEGIN{n=1} END{print n}' "$deck")
# each rank runs as many threads as its share of the machine's CPUs (strata's default:
# the CPUs divided among the ranks; OMP_NUM_THREADS or --threads N choose otherwise)
# a deck of token shards: tokenize its corpus first, once (data.token_dir holds the shards)
token_dir=$(awk -F= '/^\[/{sec=$0} sec=="[data]" && $1~/^token_dir *$/ {gsub(/[" ]/, "", $2); sub(/#.*/, "", $2); print $2}' "$deck")
if [ -n "$token_dir" ] && [ ! -d "$token_dir" ]; then
  mpiexec -n "$np" build/release/bin/strata tokenize "$deck"
fi
# an example starts over each time (--fresh moves an earlier run's checkpoints aside),
# unless it is told to resume (--restart) or to start over itself
case " $* " in
  *" --restart"* | *" --fresh "*) ;;
  *) set -- "$@" --fresh ;;
esac
exec mpiexec -n "$np" build/release/bin/strata train "$deck" "$@"
