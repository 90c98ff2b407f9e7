#!/usr/bin/env bash
# The tensor splits side by side on the "small" deck (6 heads: no 1D split of 4): 1D, 2D
# and 3D (3D also with parallel.tensor_overlap = false; data parallelism for scale) on 2
# and 4 ranks of one thread each, STEPS steps each, the median tokens/s of steps 3..
# (bench/run_speed.sh) and rank 0's communication seconds over the run: exposed (it
# waited) and overlapped (non-blocking transfers in flight while it computed). On a machine with fewer cores than ranks the ranks share
# them (OMP_WAIT_POLICY=passive, as the tests run): compare layouts of the same rank count.
# Usage: bench/tensor_modes.sh [STRATA (build/release/bin/strata)] [STEPS (6)]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/run_speed.sh
strata=${1:-build/release/bin/strata} steps=${2:-6}
export OMP_WAIT_POLICY=passive
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {
  local n=$1 name=$2
  shift 2
  local d=$out/${name// /_}
  mpiexec -n "$n" "$strata" train inputs/bench-gpt-small.toml --threads 1 --set run.steps="$steps" \
    --set run.log_every=1 --set parallel.data=1 --set run.out_dir="\"$d\"" "$@" > "$d.log" 2>&1 ||
    { echo "$name FAILED"; tail -3 "$d.log"; exit 1; }
  # rank 0's communication table: exposed seconds (the rank waited) and overlapped ones
  local comm
  comm=$(awk '/^comm / && $2 != "group" { e += $7; o += $8 } END { printf "%.3f | %.3f", e, o }' "$d.log")
  printf '| %d | %s | %.0f | %s |\n' "$n" "$name" "$(median_speed "$(echo "$d"/*/metrics.csv)")" "$comm"
}
echo "| ranks | layout | tok/s | comm exposed s | comm overlapped s |"; echo "|---|---|---|---|---|"
run 2 "1d t=2" --set parallel.tensor_cols=2
run 2 "3d 2x1x1" --set parallel.tensor_mode='"3d"' --set parallel.tensor_x=2
run 2 "3d 1x2x1" --set parallel.tensor_mode='"3d"' --set parallel.tensor_y=2
run 2 "3d 1x1x2" --set parallel.tensor_mode='"3d"' --set parallel.tensor_depth=2
run 2 "3d 1x1x2, no overlap" --set parallel.tensor_mode='"3d"' --set parallel.tensor_depth=2 --set parallel.tensor_overlap=false
run 2 "data 2" --set parallel.data=2
run 4 "data 2 x 1d t=2" --set parallel.data=2 --set parallel.tensor_cols=2
run 4 "2d 2x2" --set parallel.tensor_mode='"2d"' --set parallel.tensor_rows=2 --set parallel.tensor_cols=2
run 4 "3d 2x1x2" --set parallel.tensor_mode='"3d"' --set parallel.tensor_x=2 --set parallel.tensor_depth=2
run 4 "3d 2x1x2, no overlap" --set parallel.tensor_mode='"3d"' --set parallel.tensor_x=2 --set parallel.tensor_depth=2 \
  --set parallel.tensor_overlap=false
run 4 "3d 1x2x2" --set parallel.tensor_mode='"3d"' --set parallel.tensor_y=2 --set parallel.tensor_depth=2
run 4 "3d 2x2x1" --set parallel.tensor_mode='"3d"' --set parallel.tensor_x=2 --set parallel.tensor_y=2
