#!/usr/bin/env bash
# Layer-parallel training of a deep narrow GPT against the serial network, for the same
# steps (inputs/gpt-fortunes-mgrit.toml: 32 blocks of width 128, buffers of 2 and 2 around
# 28 MGRIT steps, coarsening 2, 2 forward / 1 backward V-cycles, warm-started):
#   serial                   the network on 1 rank (exact backpropagation)
#   L2 P2, L3 P2, L2 P4      MGRIT with 2 or 3 levels on 2 or 4 layer ranks, no control
#                            (its gradient checked every 10 steps, for the record only)
#   switch, tighten          L2 P2 whose control acts past a relative gradient error of 0.25
# on the byte-level text and, with BPE, on the 4096-piece SentencePiece tokens (serial, L2
# P2, switch, and switch at 0.2; tokenized first if need be). Each run's metrics.csv goes to OUT; the table
# (final validation loss, its difference to serial, where the control acted, seconds) is
# printed, and bench/plot_mgrit_convergence.py draws validation loss against step.
# Usage: bench/mgrit_gpt_convergence.sh [STRATA (build/release/bin/strata)] [STEPS (200)] [OUT (runs/mgrit-convergence)]
set -euo pipefail
cd "$(dirname "$0")/.."
strata=${1:-build/release/bin/strata} steps=${2:-200} out=${3:-runs/mgrit-convergence}
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$out"
deck=inputs/gpt-fortunes-mgrit.toml
bpe=(--set data.kind=tokens --set data.token_dir=runs/fortunes-bpe4096 --set data.tokenizer_type=bpe
  --set model.vocab_size=4096 --set data.shard_mb=1)
serial=(--set parallel.pipeline=1 --set parallel.schedule=1f1b)
none=(--set layerpar.control=none)
run() {  # name ranks overrides...
  local name=$1 np=$2
  shift 2
  local t0=$SECONDS
  mpiexec -n "$np" "$strata" train "$deck" --threads 1 --set run.steps="$steps" --set run.checkpoint_every=0 \
    --set run.log_every=10 --set run.out_dir="\"$out\"" --set run.name="$name" "$@" > "$out/$name.log" 2>&1 ||
    { echo "$name FAILED"; tail -3 "$out/$name.log"; exit 1; }
  echo "$name $((SECONDS - t0))" >> "$out/seconds.txt"
}
rm -f "$out/seconds.txt"
run bytes-serial 1 "${serial[@]}"
run bytes-L2P2 2 "${none[@]}"
run bytes-L3P2 2 "${none[@]}" --set layerpar.levels=3
run bytes-L2P4 4 "${none[@]}" --set parallel.pipeline=4
run bytes-switch 2
run bytes-tighten 2 --set layerpar.control=tighten
[ -f runs/fortunes-bpe4096/tokenizer.model ] ||
  mpiexec -n 2 "$strata" tokenize inputs/gpt-fortunes-spm.toml > "$out/tokenize.log" 2>&1
run bpe-serial 1 "${serial[@]}" "${bpe[@]}"
run bpe-L2P2 2 "${none[@]}" "${bpe[@]}"
run bpe-switch 2 "${bpe[@]}"
run bpe-switch02 2 "${bpe[@]}" --set layerpar.max_gradient_error=0.2
echo "| run | final val loss | vs serial | control acted | seconds |"
echo "|---|---|---|---|---|"
while read -r name secs; do
  csv=$out/$name/metrics.csv
  val=$(awk -F, 'NR > 1 && $3 != "" { v = $3 } END { print v }' "$csv")
  ref=$(awk -F, 'NR > 1 && $3 != "" { v = $3 } END { print v }' "$out/${name%%-*}-serial/metrics.csv")
  acted=$(grep -oE "gradient control: [^|]*" "$out/$name.log" | head -1 || true)
  step=$(grep -E "gradient control" "$out/$name.log" | head -1 | sed -nE 's/^step +([0-9]+)\/.*/\1/p' || true)
  printf '| %s | %.4f | %+.2f%% | %s | %s |\n' "$name" "$val" "$(echo "($val - $ref) / $ref * 100" | bc -l)" \
    "${step:+step $step: ${acted#gradient control: }}" "$secs"
done < "$out/seconds.txt"
