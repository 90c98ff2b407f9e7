#!/usr/bin/env bash
# Data parallelism across two nodes whose link is the limit (issue 76). scripts/slurm-local.sh
# brings up two nodes on this machine (network namespaces joined by virtual ethernet: MPI
# between them over TCP only), `slurm-local.sh link MBIT` limits each node's link (tc's
# token bucket), and a deck trains data = 4 on 2 nodes x 2 ranks through
# jobscripts/slurm/train.sbatch with each gradient sum in turn (parallel.grad_sum), ROUNDS
# times at each link rate. Per run: the median tokens/s of steps 3.. (bench/run_speed.sh),
# rank 0's share of the loop in communication, its seconds in the groups that cross the
# nodes ("data", "data_across") and the final loss.
# 4 ranks share this machine's cores, so MPI's waits yield the core
# (tests' mpi_yield_shim.so, LD_PRELOAD) as the tests do; OMP_WAIT_POLICY=passive.
# Needs root (the namespaces and daemons).
# Usage: bench/compression.sh [STRATA (build/release/bin/strata)] [STEPS (8)] [ROUNDS (2)]
#        [RATES ("off 1000 200"): Mbit/s each way, or off] [SUMS ("flat nodes int8")]
#        [DECK (inputs/bench-gpt-small.toml)]
# (SUMS: flat, nodes = parallel.grad_sum = "nodes", int8 and powersgd = that with
# grad_compression = "int8" or "powersgd"; SETS may give parallel.powersgd_rank, else 4)
# Env: SETS, more deck settings for every run (words: --set key=value ...); KEEP, a folder
# that receives each run's metrics.csv as SUM-RATE-ROUND.csv (bench/plot_compression.py
# draws their losses against time).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
source bench/run_speed.sh
strata=$(realpath "${1:-build/release/bin/strata}") steps=${2:-8} rounds=${3:-2}
rates=${4:-off 1000 200} sums=${5:-flat nodes int8} deck=$(realpath "${6:-inputs/bench-gpt-small.toml}")
shim=$(dirname "$strata")/../tests/mpi_yield_shim.so
[ -f "$shim" ] || { echo "no $shim: build the tests first (scripts/build.sh)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "bench/compression.sh needs root (namespaces, Slurm's daemons)" >&2; exit 2; }
out=$(mktemp -d /tmp/strata-compression.XXXXXX)
chmod 755 "$out"
export SLURM_LOCAL_DIR=$out/slurm SLURM_LOCAL_NODES=2 SLURM_LOCAL_PORT=$((20000 + ($$ * 2 + 1) % 20000))
trap '"$repo/scripts/slurm-local.sh" down >/dev/null 2>&1; rm -rf "$out"' EXIT
trap 'exit 143' TERM INT  # (the cluster down on a signal too, once the running job returns)
"$repo/scripts/slurm-local.sh" up >"$out/up.log" 2>&1 || { tail -20 "$out/up.log"; exit 1; }
eval "$("$repo/scripts/slurm-local.sh" env)"
export STRATA=$strata DECK=$deck LD_PRELOAD=$shim OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1
cd "$out"
set -f  # (the settings' globs, such as data.files, are the deck's to expand)
read -ra sets <<<"${SETS:-}"
set +f
[ -z "${KEEP:-}" ] || mkdir -p "$KEEP"
sum_keys() {  # flat, nodes, int8 or powersgd (node by node, coded across)
  case $1 in
    int8 | powersgd) echo "--set parallel.grad_sum=nodes --set parallel.grad_compression=$1" ;;
    *) echo "--set parallel.grad_sum=$1" ;;
  esac
}
run() {  # RATE SUM ROUND
  local name=$2-$1-$3
  sbatch --wait --nodes=2 --ntasks-per-node=2 --output="$out/$name.out" "$repo/jobscripts/slurm/train.sbatch" \
    --set run.name="$name" --set run.out_dir="\"$out/runs\"" --set run.steps="$steps" --set run.log_every=1 \
    --set run.checkpoint_every=0 --set parallel.data=4 $(sum_keys "$2") "${sets[@]}" >/dev/null 2>&1 ||
    { echo "| $1 | $2 | $3 | FAILED |"; tail -5 "$out/$name.out"; return; }
  local share across loss
  share=$(sed -nE 's/^communication \(rank 0\): [0-9.]+ s = ([0-9.]+)% of the loop.*/\1/p' "$out/$name.out")
  across=$(awk '/^comm / && ($2 == "data" || $2 == "data_across") { s += $7 } END { printf "%.2f", s }' "$out/$name.out")
  loss=$(tail -1 "$out/runs/$name/metrics.csv" | cut -d, -f2)
  [ -z "${KEEP:-}" ] || cp "$out/runs/$name/metrics.csv" "$KEEP/$name.csv"
  printf '| %s | %s | %d | %.0f | %s%% | %s | %s |\n' "$1" "$2" "$3" "$(median_speed "$out/runs/$name/metrics.csv")" \
    "$share" "$across" "$loss"
}
echo "deck $deck ${SETS:-}, data = 4 on 2 nodes x 2 ranks, $steps steps; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
echo "| link Mbit/s | sum | round | tok/s | comm share | comm s over the nodes' groups | final loss |"
echo "|---|---|---|---|---|---|---|"
for rate in $rates; do
  "$repo/scripts/slurm-local.sh" link "$rate" 2>/dev/null
  for round in $(seq 1 "$rounds"); do
    for sum in $sums; do run "$rate" "$sum" "$round"; done
  done
done
