#!/usr/bin/env bash
# GPT-2 124M's shapes end to end: a Hugging Face folder of random weights in GPT-2 124M's
# shapes (made here, the hub's tensor names without "transformer.", with the mask buffers
# the hub's file carries) and llm.c token shards of random GPT-2 ids, read by
# inputs/gpt2-124m-finetune.toml's model (vocabulary 50257 padded to 50304, T = 1024) on
# 2 ranks with a 1D tensor split and on 2 pipeline stages: both load it and train 2 steps to
# the same losses (1e-5 relative), and the first is near ln(50257) for weights this small.
# Usage: test_gpt2_124m.sh STRATA MPIEXEC TESTS_DIR INPUTS_DIR
set -u
strata=$1 mpiexec=$2 tests=$3 inputs=$4
source "$tests/support/test_lib.sh"
cd "$work"
timeout 300 /usr/bin/python3 "$tests/tools/check_gpt2_interop.py" synth-124m gpt2 || { fail "making the 124M files"; finish; }
for layout in tensor_cols pipeline; do
  start=$(date +%s)
  if timeout 600 "$mpiexec" -n 2 "$strata" train "$inputs/gpt2-124m-finetune.toml" --set run.name=$layout \
      --set run.steps=2 --set run.log_every=1 --set run.val_every=0 --set run.checkpoint_every=0 \
      --set 'model.init_from="gpt2"' --set 'data.shards=["gpt2/synth_train.bin"]' \
      --set 'data.val_shards=["gpt2/synth_val.bin"]' --set data.batch_size=1 --set parallel.data=1 \
      --set parallel.$layout=2 > $layout.log 2>&1; then
    ok "$layout=2: loaded and trained 2 steps in $(($(date +%s) - start)) s: $(grep 'strata: init_from:' $layout.log)"
  else
    fail "$layout=2"; tail -20 $layout.log
  fi
done
grep -q "1 tensors the model does not use\|12 tensors the model does not use" tensor_cols.log &&
  ok "the hub's mask buffers are left aside" || fail "no note of the tensors left aside"
python3 - tensor_cols pipeline <<'PY' && ok "the two layouts' losses agree" || fail "losses"
import csv, math, sys
a, b = ([float(r["loss"]) for r in csv.DictReader(open(f"runs/{n}/metrics.csv"))] for n in sys.argv[1:])
print("losses, t=2:", a, "2 stages:", b)
assert len(a) == len(b) == 2 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)), (a, b)
assert abs(a[0] - math.log(50257)) < 0.5, a[0]
PY
finish
