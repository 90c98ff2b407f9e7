#!/usr/bin/env bash
# Whole-run comparison with PyTorch on the same model, batch shape and thread count:
# bench/peers/torch_gpt.py (PyTorch's own layers, AdamW, random tokens) against strata on
# the decks inputs/bench-gpt-{tiny,small}.toml, one thread each, run one after the other.
# Prints tokens/s, the ratio, and each one's model FLOP/s as a fraction of the SGEMM rate
# strata measures at the model's shapes (6N + 12 L T C FLOPs per token for both), with the
# OpenBLAS kernels both ran (both inherit OPENBLAS_CORETYPE, if set). Each side keeps its
# fastest run: PyTorch's of its variants, strata's of two (the VM's step times move by a
# few percent from run to run). --bf16 adds rows with bf16 products on both sides (strata
# model.precision = "bf16", PyTorch autocast to bf16), and strata bf16 over strata fp32.
#   bench/compare_torch.sh [tiny small] [--two-ranks] [--bf16]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
configs=()
two_ranks=0
precisions=(fp32)
for a in "$@"; do
  case $a in
    --two-ranks) two_ranks=1 ;;
    --bf16) precisions=(fp32 bf16) ;;
    *) configs+=("$a") ;;
  esac
done
[ ${#configs[@]} -gt 0 ] || configs=(tiny small)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

tok_s() { sed -E 's/.* ([0-9.]+) tok\/s.*/\1/' <<<"$1"; }

# PyTorch's fastest of its variants on np threads: its BLAS threaded or not (np > 1), and
# glibc's malloc as it comes or told to keep freed memory (PyTorch's CPU allocator frees
# every step's activations, and on a VM where page faults are dear that costs it up to a
# third of its speed; strata allocates once).
torch_best() {  # config threads precision
  local cfg=$1 np=$2 precision=$3 best="" line blas malloc
  for blas in 1 $([ "$np" -gt 1 ] && echo "$np"); do
    for malloc in default keep; do
      line=$(
        if [ $malloc = keep ]; then
          export MALLOC_MMAP_THRESHOLD_=4000000000 MALLOC_TRIM_THRESHOLD_=8000000000 MALLOC_TOP_PAD_=536870912
        fi
        OPENBLAS_NUM_THREADS=$blas OMP_NUM_THREADS=$blas \
          /usr/bin/python3 bench/peers/torch_gpt.py --config "$cfg" --steps 20 --threads "$np" \
            --precision "$precision")
      if [ -z "$best" ] || awk -v a="$(tok_s "$line")" -v b="$(tok_s "$best")" 'BEGIN { exit !(a > b) }'; then
        best=$line
      fi
    done
  done
  echo "$best"
}

# A metrics.csv row's value of a column, found by the header's name (so a column added
# to metrics.csv cannot shift what this script reads).
column_of() {  # name row
  awk -F, -v name="$1" -v row="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) k = i }
    END { split(row, v, ","); print v[k] }' "$out/header.csv"
}
tok_s_of() { column_of tokens_per_s "$1"; }

# strata's faster of two runs, as its progress line and metrics row: "log|row". The last
# metrics row covers steps 2..N (step 1 is logged, and timed, on its own).
strata_best() {  # config ranks precision
  local cfg=$1 np=$2 precision=$3 best="" log row
  for _ in 1 2; do
    log=$(mpiexec -n "$np" build/release/bin/strata train "inputs/bench-gpt-$cfg.toml" \
      --set run.out_dir="$out" --set parallel.data="$np" --set model.precision="$precision")
    head -1 "$out/bench-gpt-$cfg/metrics.csv" > "$out/header.csv"
    row=$(tail -n +2 "$out/bench-gpt-$cfg/metrics.csv" | tail -1)
    if [ -z "$best" ] || awk -v a="$(tok_s_of "$row")" -v b="$(tok_s_of "${best#*|}")" 'BEGIN { exit !(a > b) }'; then
      best="$(grep "gemm probe" <<<"$log")|$row"
    fi
  done
  echo "$best"
}

declare -A strata_fp32  # tok/s of each "config ranks" in fp32, for the bf16 rows' speed-up

run_pair() {  # config ranks precision
  local cfg=$1 np=$2 precision=$3 torch_line strata_run
  torch_line=$(torch_best "$cfg" "$np" "$precision")
  strata_run=$(strata_best "$cfg" "$np" "$precision")
  local t_tok t_gf s_tok s_gf peak kernels
  t_tok=$(tok_s "$torch_line")
  t_gf=$(sed -E 's/.* ([0-9.]+) GFLOP\/s.*/\1/' <<<"$torch_line")
  s_tok=$(tok_s_of "${strata_run#*|}")
  s_gf=$(column_of gflops_per_s "${strata_run#*|}")
  peak=$(sed -nE 's/.*gemm probe ([0-9.]+) GFLOP\/s per rank.*/\1/p' <<<"${strata_run%%|*}")
  kernels=$(sed -nE 's/.*\(OpenBLAS ([A-Za-z0-9]+) kernels\).*/\1/p' <<<"${strata_run%%|*}")
  local vs_fp32=""
  if [ "$precision" = fp32 ]; then
    strata_fp32["$cfg $np"]=$s_tok
  elif [ -n "${strata_fp32["$cfg $np"]:-}" ]; then
    vs_fp32=$(awk -v a="$s_tok" -v b="${strata_fp32["$cfg $np"]}" 'BEGIN { printf " | strata bf16/fp32 %.2fx", a / b }')
  fi
  awk -v c="$cfg" -v pr="$precision" -v np="$np" -v tt="$t_tok" -v tg="$t_gf" -v st="$s_tok" -v sg="$s_gf" -v pk="$peak" \
    -v kn="$kernels" -v vs="$vs_fp32" 'BEGIN {
    printf "%-6s %-4s %5d | %10.0f %10.0f %6.2fx | %7.1f %7.1f | %5.0f%% %5.0f%% of %.1f GFLOP/s x %d (%s)%s\n",
      c, pr, np, tt, st, st / tt, tg, sg, 100 * tg / (pk * np), 100 * sg / (pk * np), pk, np, kn, vs }'
}

echo "config prec ranks | torch tok/s strata tok/s  ratio | torch GF/s strata GF/s | fraction of SGEMM rate (torch, strata)"
for precision in "${precisions[@]}"; do
  for cfg in "${configs[@]}"; do run_pair "$cfg" 1 "$precision"; done
  if [ $two_ranks = 1 ]; then
    for cfg in "${configs[@]}"; do run_pair "$cfg" 2 "$precision"; done
  fi
done
