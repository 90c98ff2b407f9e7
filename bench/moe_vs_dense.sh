#!/usr/bin/env bash
# The mixture-of-experts deck against the dense deck of the same active products per token,
# on 2 ranks, the same 300 steps and data (the fortunes BPE shards), one after the other:
# inputs/gpt-fortunes-spm.toml (dense, data 2) and inputs/gpt-fortunes-moe.toml (8 experts
# of width 256, top 2, in blocks 1 and 3, expert 2), dropless and with capacity factors
# 1.0 and 1.25. Prints validation bits per byte, tokens/s (the "done" line's, the whole
# run) and the experts' load and dropped share at step 25 and step 300 (the progress
# lines' windows). Tokenizes first if the shards are not there.
#   bench/moe_vs_dense.sh [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
steps=${1:-300}
strata=build/release/bin/strata
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -f runs/fortunes-bpe4096/tokenizer.model ] || mpirun -n 2 $strata tokenize inputs/gpt-fortunes-moe.toml >/dev/null
run() {  # label deck [--set ...]
  local label=$1 deck=$2
  shift 2
  mpirun -n 2 $strata train "$deck" --set run.out_dir="$out" --set run.name="$label" --set run.steps="$steps" \
    --set run.val_every="$steps" --set run.checkpoint_every=0 --set run.log_every=25 "$@" > "$out/$label.log" 2>&1
  local bpb tok first last
  bpb=$(grep -o 'val [0-9.]* ([0-9.]* bits/byte)' "$out/$label.log" | tail -1 | sed 's/.*(\([0-9.]*\) bits.*/\1/')
  tok=$(grep -o 'done: .* \([0-9]*\) tokens/s' "$out/$label.log" | grep -o '[0-9]* tokens/s' | cut -d' ' -f1)
  first=$(grep -o 'experts [0-9/]*% dropped [0-9.]*%' "$out/$label.log" | head -1 || true)
  last=$(grep -o 'experts [0-9/]*% dropped [0-9.]*%' "$out/$label.log" | tail -1 || true)
  printf '| %s | %s | %s | %s | %s |\n' "$label" "$bpb" "$tok" "${first:--}" "${last:--}"
}
echo "| run | val bits/byte | tokens/s | load, dropped at step 25 | at step $steps |"
echo "|---|---|---|---|---|"
run dense inputs/gpt-fortunes-spm.toml
run moe inputs/gpt-fortunes-moe.toml
run moe-cap1.0 inputs/gpt-fortunes-moe.toml --set model.moe_capacity_factor=1.0
run moe-cap1.25 inputs/gpt-fortunes-moe.toml --set model.moe_capacity_factor=1.25
