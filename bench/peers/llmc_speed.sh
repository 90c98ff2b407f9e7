#!/usr/bin/env bash
# strata beside llm.c's CPU trainer (train_gpt2.c: C and OpenMP, fp32), GPT-2 124M at
# llm.c's own batch (B = 4, T = 64, the vocabulary padded to 50304), the same weights and
# the same token shard, at each thread count in turn, ROUNDS times:
#   - a shard of random GPT-2 ids in llm.c's .bin format, read by both;
#   - strata draws GPT-2 124M, trains one step, checkpoints and writes the llm.c model file
#     (strata export --format llmc); both trainers start from that file (strata through
#     model.init_from), lr 1e-4, no weight decay, no clipping, as llm.c's main trains;
#   - llm.c: a harness compiled with llm.c's Makefile flags (-Ofast -march=native -fopenmp)
#     against its train_gpt2.c, unchanged, running its DataLoader and its forward, zero_grad,
#     backward and update, timed per step as its main times them;
#   - strata: fp32, then bf16 where oneDNN runs bf16 here (tokens/s beside, not compared);
#   - PyTorch's CPU build where /usr/bin/python3 has it (bench/peers/torch_gpt.py --config
#     gpt2-llmc: its own layers and AdamW, random tokens, the mean of STEPS - 2 steps).
# Per run the median tokens/s of steps 3.. and the last step's loss.
# Usage: bench/peers/llmc_speed.sh [LLMC_DIR] [STEPS (8)] [ROUNDS (2)] [THREADS ("1 2")] [BUILD_DIR (build/release)]
# LLMC_DIR: an llm.c checkout (its train_gpt2.c and llmc/ are copied into this run's
# temporary folder and built there); left out or "", it is cloned from GitHub there.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/run_speed.sh
llmc=${1:-} steps=${2:-8} rounds=${3:-2} threads=${4:-"1 2"} build=${5:-build/release}
strata=$build/bin/strata
unset OMP_WAIT_POLICY  # passive waits cost a threaded step 10-40% (docs/benchmarks.md)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$llmc" ]; then
  git clone -q --depth 1 https://github.com/karpathy/llm.c "$work/llm.c-src"
  llmc=$work/llm.c-src
fi
mkdir -p "$work/llmc"
cp -r "$llmc/train_gpt2.c" "$llmc/llmc" "$work/llmc/"
echo "llm.c: $(git -C "$llmc" log -1 --format=%h 2>/dev/null || echo "$llmc"); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"

/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(1)
for name, n in (("train", 1 << 20), ("val", 1 << 16)):
    header = np.zeros(256, np.int32); header[:3] = (20240520, 1, n)
    with open(f"{sys.argv[1]}/{name}.bin", "wb") as f:
        f.write(header.tobytes()); f.write(rng.integers(0, 50257, n, dtype=np.uint16).tobytes())
PY

cat > "$work/llmc/harness.c" <<'C'
#define main llmc_main
#include "train_gpt2.c"
#undef main
int main(int argc, char** argv) {  // model.bin train.bin steps
  GPT2 model;
  gpt2_build_from_checkpoint(&model, argv[1]);
  const int B = 4, T = 64, steps = atoi(argv[3]);
  DataLoader loader;
  dataloader_init(&loader, argv[2], B, T, 0, 1, 0);
  struct timespec start, end;
  for (int step = 1; step <= steps; step++) {
    dataloader_next_batch(&loader);
    clock_gettime(CLOCK_MONOTONIC, &start);
    gpt2_forward(&model, loader.inputs, loader.targets, B, T);
    gpt2_zero_grad(&model);
    gpt2_backward(&model);
    gpt2_update(&model, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f, step);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double s = (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
    printf("%d,%f,%f\n", step, model.mean_loss, B * T / s);
  }
  return 0;
}
C
gcc -Ofast -march=native -fopenmp -DOMP -I"$work/llmc" -o "$work/harness" "$work/llmc/harness.c" -lm

deck=(inputs/bench-gpt2-124m.toml --set model.seq_len=64 --set model.padded_vocab_size=50304 --set data.batch_size=4
      --set data.kind='"tokens"' --set data.shards="[\"$work/train.bin\"]" --set data.val_shards="[\"$work/val.bin\"]"
      --set optim.lr=1e-4 --set optim.min_lr=1e-4 --set optim.weight_decay=0 --set optim.grad_clip=0 --set run.log_every=1)
"$strata" train "${deck[@]}" --set run.steps=1 --set run.checkpoint_every=1 --set run.out_dir="\"$work/init\"" > "$work/init.log" 2>&1 ||
  { tail -3 "$work/init.log"; exit 1; }
"$strata" export "$(ls "$work"/init/*/checkpoints/*.h5 | tail -1)" "$work/model.bin" --format llmc > /dev/null

# the median of column 3 (tokens/s) over steps 3.. of the harness's "step,loss,tok/s" lines
median_of_lines() { awk -F, '/^[0-9]+,/ && $1 >= 3 { print $3 }' "$1" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
strata_run() {  # threads precision -> "tok/s loss"
  local d=$work/s$1-$2-$RANDOM
  OMP_NUM_THREADS=$1 "$strata" train "${deck[@]}" --threads "$1" --set model.precision="\"$2\"" --set run.steps="$steps" \
    --set model.init_from="\"$work/model.bin\"" --set run.out_dir="\"$d\"" > "$d.log" 2>&1 || { tail -3 "$d.log" >&2; exit 1; }
  echo "$(median_speed "$(echo "$d"/*/metrics.csv)") $(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "loss") c = i } END { print $c }' "$d"/*/metrics.csv)"
}
torch_run() {  # threads -> tok/s, or - without PyTorch
  /usr/bin/python3 -c 'import torch' 2>/dev/null || { echo -; return; }
  /usr/bin/python3 bench/peers/torch_gpt.py --config gpt2-llmc --threads "$1" --warmup 2 --steps $((steps - 2)) |
    sed -E 's/.* ([0-9.]+) tok\/s.*/\1/'
}
bf16=1
runs_bf16 "$strata" "$work" || bf16=0
echo "| threads | round | llm.c tok/s | strata fp32 tok/s | strata / llm.c | strata bf16 tok/s | PyTorch fp32 tok/s | loss at step $steps: llm.c, strata fp32, bf16 |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
  for t in $threads; do
    OMP_NUM_THREADS=$t "$work/harness" "$work/model.bin" "$work/train.bin" "$steps" > "$work/llmc.csv"
    l=$(median_of_lines "$work/llmc.csv")
    lloss=$(tail -1 "$work/llmc.csv" | cut -d, -f2)
    run=$(strata_run "$t" fp32)  # (a failed run stops the script here)
    read -r f floss <<< "$run"
    b=- bloss=-
    if [ "$bf16" = 1 ]; then
      run=$(strata_run "$t" bf16)
      read -r b bloss <<< "$run"
      b=$(printf %.0f "$b") bloss=$(printf %.4f "$bloss")
    fi
    p=$(torch_run "$t")
    printf '| %d | %d | %.0f | %.0f | %.2fx | %s | %s | %.4f, %.4f, %s |\n' "$t" "$round" "$l" "$f" \
      "$(awk -v f="$f" -v l="$l" 'BEGIN { print f / l }')" "$b" "$p" "$lloss" "$floss" "$bloss"
  done
done
