#!/usr/bin/env bash
# Whole-run comparison with PyTorch on the same model, batch shape and thread count:
# bench/peers/torch_gpt.py (PyTorch's own layers, AdamW, random tokens) against strata on
# the decks inputs/bench-gpt-{tiny,small}.toml, one thread each, run one after the other.
# Prints tokens/s, the ratio, and each one's model FLOP/s as a fraction of the SGEMM rate
# strata measures at the model's shapes (6N + 12 L T C FLOPs per token for both).
#   bench/compare_torch.sh [tiny small] [--two-ranks]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
configs=()
two_ranks=0
for a in "$@"; do
  if [ "$a" = --two-ranks ]; then two_ranks=1; else configs+=("$a"); fi
done
[ ${#configs[@]} -gt 0 ] || configs=(tiny small)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

tok_s() { sed -E 's/.* ([0-9.]+) tok\/s.*/\1/' <<<"$1"; }

# PyTorch's fastest of its variants on np threads: its BLAS threaded or not (np > 1), and
# glibc's malloc as it comes or told to keep freed memory (PyTorch's CPU allocator frees
# every step's activations, and on a VM where page faults are dear that costs it up to a
# third of its speed; strata allocates once).
torch_best() {  # config threads
  local cfg=$1 np=$2 best="" line blas malloc
  for blas in 1 $([ "$np" -gt 1 ] && echo "$np"); do
    for malloc in default keep; do
      line=$(
        if [ $malloc = keep ]; then
          export MALLOC_MMAP_THRESHOLD_=4000000000 MALLOC_TRIM_THRESHOLD_=8000000000 MALLOC_TOP_PAD_=536870912
        fi
        OPENBLAS_NUM_THREADS=$blas OMP_NUM_THREADS=$blas \
          /usr/bin/python3 bench/peers/torch_gpt.py --config "$cfg" --steps 20 --threads "$np")
      if [ -z "$best" ] || awk -v a="$(tok_s "$line")" -v b="$(tok_s "$best")" 'BEGIN { exit !(a > b) }'; then
        best=$line
      fi
    done
  done
  echo "$best"
}

run_pair() {  # config ranks
  local cfg=$1 np=$2 torch_line strata_log
  torch_line=$(torch_best "$cfg" "$np")
  strata_log=$(mpiexec -n "$np" build/release/bin/strata train "inputs/bench-gpt-$cfg.toml" \
    --set run.out_dir="$out" --set parallel.data="$np")
  local t_tok t_gf s_tok s_gf peak
  t_tok=$(tok_s "$torch_line")
  t_gf=$(sed -E 's/.* ([0-9.]+) GFLOP\/s.*/\1/' <<<"$torch_line")
  # the last progress line covers steps 2..N (step 1 is logged, and timed, on its own)
  s_tok=$(tail -n +2 "$out/bench-gpt-$cfg/metrics.csv" | tail -1 | cut -d, -f7)
  s_gf=$(tail -n +2 "$out/bench-gpt-$cfg/metrics.csv" | tail -1 | cut -d, -f8)
  peak=$(sed -nE 's/.*gemm probe ([0-9.]+) GFLOP\/s per rank.*/\1/p' <<<"$strata_log")
  awk -v c="$cfg" -v np="$np" -v tt="$t_tok" -v tg="$t_gf" -v st="$s_tok" -v sg="$s_gf" -v pk="$peak" 'BEGIN {
    printf "%-6s %5d | %10.0f %10.0f %6.2fx | %7.1f %7.1f | %5.0f%% %5.0f%% of %.1f GFLOP/s x %d\n",
      c, np, tt, st, st / tt, tg, sg, 100 * tg / (pk * np), 100 * sg / (pk * np), pk, np }'
}

echo "config ranks | torch tok/s strata tok/s  ratio | torch GF/s strata GF/s | fraction of SGEMM rate (torch, strata)"
for cfg in "${configs[@]}"; do run_pair "$cfg" 1; done
if [ $two_ranks = 1 ]; then
  for cfg in "${configs[@]}"; do run_pair "$cfg" 2; done
fi
