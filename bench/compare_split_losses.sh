#!/usr/bin/env bash
# Two builds of strata on the tiny benchmark deck under every tensor split, 6 steps each:
# whether every step's loss is the same to the 9 digits metrics.csv keeps. compare_builds.sh
# times unsplit runs; this covers what it does not run: 1D (plain, with sequence
# parallelism, in bf16), 2D 2x2, 3D 2x1x2 and 1x2x2, and mixtures of 4 experts under 1D and
# 3D 2x2x1 (4 ranks, oversubscribed on fewer cores). For a refactoring that must change
# nothing (build the old commit as compare_builds.sh says).
# Usage: bench/compare_split_losses.sh OLD_STRATA NEW_STRATA
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/run_speed.sh
old=$1 new=$2
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
run() {  # name ranks overrides...
  local name=$1 n=$2 side bin dir
  shift 2
  for side in old new; do
    bin=${!side} dir=$out/$name-$side
    if ! mpiexec -n "$n" "$bin" train inputs/bench-gpt-tiny.toml --set run.steps=6 --set run.log_every=1 \
      --set run.out_dir="\"$dir\"" --set parallel.data=1 "$@" > "$dir.log" 2>&1; then
      echo "$name: the $side build failed"; tail -3 "$dir.log"; status=1; return
    fi
    cut -d, -f2 "$dir"/*/metrics.csv > "$dir.losses"
  done
  if cmp -s "$out/$name-old.losses" "$out/$name-new.losses"; then
    echo "$name: identical (step 6: $(tail -1 "$out/$name-new.losses"))"
  else
    echo "$name: DIFFERENT"; paste "$out/$name-old.losses" "$out/$name-new.losses"; status=1
  fi
}
three_d=(--set parallel.tensor_mode=3d)
run 1d 2 --set parallel.tensor_cols=2
run 1d-sequence 2 --set parallel.tensor_cols=2 --set parallel.sequence_parallel=true
if runs_bf16 "$new" "$out"; then
  run 1d-bf16 2 --set parallel.tensor_cols=2 --set model.precision='"bf16"'
else
  echo "compare_split_losses: bf16 products do not run here: 1d-bf16 left out"
fi
run 2d 4 --set parallel.tensor_mode=2d --set parallel.tensor_rows=2 --set parallel.tensor_cols=2
run 3d-2x1x2 4 "${three_d[@]}" --set parallel.tensor_x=2 --set parallel.tensor_depth=2
run 3d-1x2x2 4 "${three_d[@]}" --set parallel.tensor_y=2 --set parallel.tensor_depth=2
run 1d-moe 2 --set parallel.tensor_cols=2 --set model.moe_experts=4 --set model.moe_top_k=2
run 3d-moe 4 "${three_d[@]}" --set parallel.tensor_x=2 --set parallel.tensor_y=2 --set model.moe_experts=4 \
  --set model.moe_top_k=2 --set model.moe_capacity_factor=1.25
exit $status
