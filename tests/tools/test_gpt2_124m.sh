#!/usr/bin/env bash
# GPT-2 124M's shapes end to end: a Hugging Face folder of random weights in GPT-2 124M's
# shapes (made here, the hub's tensor names without "transformer.", with the mask buffers
# the hub's file carries) and llm.c token shards of random GPT-2 ids, read by
# inputs/gpt2-124m-finetune.toml's model (vocabulary 50257 padded to 50304, T = 1024) on
# 2 ranks with a 1D tensor split and on 2 pipeline stages: both load it and train 2 steps to
# the same losses (1e-5 relative), and the first loss equals, to 1e-5 relative, the loss an
# independent float64 GPT-2 in PyTorch computes from the same file on the same sequence
# (the train shard holds exactly T + 1 tokens, so its one sequence starts at 0): a run
# that ignored model.init_from starts from strata's own weights (seen: 10.9931 against
# 10.9628) and fails it.
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
      --set 'model.init_from="gpt2"' --set 'data.shards=["gpt2/synth_one.bin"]' \
      --set 'data.val_shards=["gpt2/synth_val.bin"]' --set data.batch_size=1 --set parallel.data=1 \
      --set parallel.$layout=2 > $layout.log 2>&1; then
    ok "$layout=2: loaded and trained 2 steps in $(($(date +%s) - start)) s: $(grep 'strata: init_from:' $layout.log)"
  else
    fail "$layout=2"; tail -20 $layout.log
  fi
done
grep -q "1 tensors the model does not use\|12 tensors the model does not use" tensor_cols.log &&
  ok "the hub's mask buffers are left aside" || fail "no note of the tensors left aside"
torch_loss=$(timeout 300 /usr/bin/python3 "$tests/tools/check_gpt2_interop.py" loss-124m gpt2 gpt2/synth_one.bin)
/usr/bin/python3 - "$torch_loss" tensor_cols pipeline <<'PY' && ok "the two layouts' losses agree, the first with PyTorch's GPT-2 ($torch_loss)" || fail "losses"
import csv, sys
ref = float(sys.argv[1])
a, b = ([float(r["loss"]) for r in csv.DictReader(open(f"runs/{n}/metrics.csv"))] for n in sys.argv[2:])
print("losses, t=2:", a, "2 stages:", b, "PyTorch's first:", ref)
assert len(a) == len(b) == 2 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)), (a, b)
assert abs(a[0] - ref) <= 1e-5 * abs(ref), (a[0], ref, abs(a[0] - ref) / abs(ref))
PY
finish
