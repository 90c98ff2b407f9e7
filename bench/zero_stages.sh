#!/usr/bin/env bash
# The ZeRO stages side by side on the "small" deck, data parallelism over 2 ranks of one
# thread each: zero = 0, 1, 2 and 3 taking turns ROUNDS times, STEPS steps each; per run the
# median tokens/s of steps 3.. (bench/run_speed.sh), rank 0's memory line (parameters,
# gradients, AdamW moments, peak RSS) and its exposed communication seconds.
# Usage: bench/zero_stages.sh [STRATA (build/release/bin/strata)] [STEPS (8)] [ROUNDS (3)]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/run_speed.sh
strata=${1:-build/release/bin/strata} steps=${2:-8} rounds=${3:-3}
export OMP_WAIT_POLICY=passive
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {
  local zero=$1 round=$2 d=$out/zero$1-$2
  mpiexec -n 2 "$strata" train inputs/bench-gpt-small.toml --threads 1 --set run.steps="$steps" \
    --set run.log_every=1 --set parallel.data=2 --set parallel.zero="$zero" --set run.out_dir="\"$d\"" > "$d.log" 2>&1 ||
    { echo "zero $zero FAILED"; tail -3 "$d.log"; exit 1; }
  local mem comm
  mem=$(sed -nE 's/^memory \(rank 0\): parameters ([0-9.]+) MiB, gradients ([0-9.]+) MiB, AdamW moments ([0-9.]+) MiB.*peak RSS ([0-9]+) MiB$/\1 | \2 | \3 | \4/p' "$d.log")
  comm=$(awk '/^comm / && $2 != "group" { e += $7 } END { printf "%.3f", e }' "$d.log")
  printf '| %d | %d | %.0f | %s | %s |\n' "$zero" "$round" "$(median_speed "$(echo "$d"/*/metrics.csv)")" "$mem" "$comm"
}
echo "| zero | round | tok/s | params MiB | grads MiB | moments MiB | peak RSS MiB | comm exposed s |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
  for zero in 0 1 2 3; do run "$zero" "$round"; done
done
