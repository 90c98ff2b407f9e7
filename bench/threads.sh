#!/usr/bin/env bash
# Ranks x threads on one machine, side by side in one run: the "small" benchmark deck in
# fp32 and bf16 (where bf16 products run) as 1 rank x 1 thread, 1 rank x 2 threads and 2
# ranks x 1 thread (data parallel), the three taking turns, REPS runs each. Prints each
# layout's tokens/s (the median over steps 3.. of its best run), its speed-up over 1 x 1,
# the state + activations of all its ranks (the run's memory line, rank 0's times the
# ranks), and the CPU. docs/benchmarks.md keeps its table.
# Usage: bench/threads.sh [STRATA (build/release/bin/strata)] [REPS (2)] [STEPS (12)] [DECK (small)]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/run_speed.sh
strata=${1:-build/release/bin/strata} reps=${2:-2} steps=${3:-12} deck=${4:-small}
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS  # --threads says it
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
precisions=(fp32)
if runs_bf16 "$strata" "$out"; then
  precisions+=(bf16)
else
  echo "threads: bf16 products do not run here: bf16 left out"
fi
echo "threads: $(lscpu | sed -nE 's/^Model name: +//p'), $(nproc) CPUs; $deck deck, $steps steps, best of $reps"
printf '| deck | precision | ranks x threads | tok/s | vs 1 x 1 | state + activations, all ranks |\n|---|---|---|---|---|---|\n'
layouts=("1 1" "1 2" "2 1")
for precision in "${precisions[@]}"; do
  declare -A best=() mem=()
  for rep in $(seq "$reps"); do
    for layout in "${layouts[@]}"; do
      read -r ranks threads <<<"$layout"
      dir=$out/$precision-$ranks-$threads-$rep
      mpiexec -n "$ranks" "$strata" train "inputs/bench-gpt-$deck.toml" --threads "$threads" --set parallel.data="$ranks" \
        --set model.precision="\"$precision\"" --set run.steps="$steps" --set run.log_every=1 \
        --set run.out_dir="\"$dir\"" > "$dir.log" 2>&1 || { tail -5 "$dir.log"; exit 1; }
      s=$(median_speed "$(echo "$dir"/*/metrics.csv)")
      if awk -v a="$s" -v b="${best[$layout]:-0}" 'BEGIN { exit !(a > b) }'; then best[$layout]=$s; fi
      m=$(sed -nE 's/.*\(state \+ activations ([0-9.]+) MiB\).*/\1/p' "$dir.log")
      mem[$layout]=$(awk -v m="$m" -v r="$ranks" 'BEGIN { printf "%.0f", m * r }')
    done
  done
  for layout in "${layouts[@]}"; do
    read -r ranks threads <<<"$layout"
    awk -v d="$deck" -v p="$precision" -v r="$ranks" -v t="$threads" -v s="${best[$layout]}" -v b="${best["1 1"]}" \
      -v m="${mem[$layout]}" 'BEGIN { printf "| %s | %s | %d x %d | %.0f | %.2fx | %s MiB |\n", d, p, r, t, s, s / b, m }'
  done
  unset best mem
done
