#!/usr/bin/env bash
# Two builds of strata side by side on the benchmark decks: tiny and small in fp32, small
# in bf16 (where bf16 products run), on 1 and 2 ranks (data parallel), one thread per
# rank, the two builds taking turns, REPS runs each. Prints each build's tokens/s (the
# median over steps 3.. of its best run), their ratio, and whether every step's loss is
# the same to the 9 digits metrics.csv keeps. For a refactoring that must change nothing:
#   git worktree add /tmp/before <commit> && (cd /tmp/before && scripts/build-kokkos.sh openmp &&
#     cmake --preset release && cmake --build --preset release -j --target strata)
#   (a commit from before scripts/build-kokkos.sh: leave that step out)
#   bench/compare_builds.sh /tmp/before/build/release/bin/strata build/release/bin/strata
#   (bench/compare_split_losses.sh checks the tensor splits' losses, which this does not run)
# Usage: bench/compare_builds.sh OLD_STRATA NEW_STRATA [REPS (2)] [STEPS (12)]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/run_speed.sh
old=$1 new=$2 reps=${3:-2} steps=${4:-12}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
configs=("tiny fp32" "small fp32")
if runs_bf16 "$new" "$out"; then
  configs+=("small bf16")
else
  echo "compare_builds: bf16 products do not run here: small bf16 left out"
fi
printf '| deck | precision | ranks | before tok/s | after tok/s | after / before | losses |\n|---|---|---|---|---|---|---|\n'
for cfg in "${configs[@]}"; do
  read -r model precision <<<"$cfg"
  for ranks in 1 2; do
    declare -A best=([old]=0 [new]=0)
    for rep in $(seq "$reps"); do
      for side in old new; do
        bin=${!side}
        dir=$out/$model-$precision-$ranks-$side-$rep
        mpiexec -n "$ranks" "$bin" train "inputs/bench-gpt-$model.toml" --set parallel.data="$ranks" \
          --set model.precision="\"$precision\"" --set run.steps="$steps" --set run.log_every=1 \
          --set run.out_dir="\"$dir\"" > "$dir.log" 2>&1 || { tail -5 "$dir.log"; exit 1; }
        csv=$(echo "$dir"/*/metrics.csv)
        cut -d, -f2 "$csv" > "$dir.losses"
        s=$(median_speed "$csv")
        if awk -v a="$s" -v b="${best[$side]}" 'BEGIN { exit !(a > b) }'; then best[$side]=$s; fi
      done
    done
    same=$(cmp -s "$out/$model-$precision-$ranks-old-1.losses" "$out/$model-$precision-$ranks-new-1.losses" &&
           echo "identical" || echo "DIFFER")
    awk -v m="$model" -v p="$precision" -v r="$ranks" -v a="${best[old]}" -v b="${best[new]}" -v s="$same" \
      'BEGIN { printf "| %s | %s | %d | %.0f | %.0f | %.3f | %s |\n", m, p, r, a, b, b / a, s }'
    unset best
  done
done
