#!/usr/bin/env bash
# --trace on a 2-stage 1F1B run writes a Chrome trace with one row per rank, every
# micro-batch's forward and backward on both stages, and tools/plot_trace.py draws it and
# measures the bubble.
set -eu
strata=$1 mpiexec=$2 tool=$3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cd "$d"
cat > deck.toml <<'DECK'
[run]
steps = 3
log_every = 100
[model]
n_layer = 2
n_embd = 32
n_head = 4
seq_len = 16
[data]
kind = "random"
batch_size = 6
[parallel]
pipeline = 2
micro_batches = 3
DECK
timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml --trace trace.json > log.txt 2>&1 || { cat log.txt; exit 1; }
grep -q "wrote the timeline of every rank to trace.json" log.txt
/usr/bin/python3 - <<'PY'
import json
doc = json.load(open("trace.json"))
rows = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["tid"] < 10000}
assert sorted(rows) == [0, 1], rows
assert "stage 1" in rows[1], rows
for tid in (0, 1):
    names = [e["name"] for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] == tid]
    for mb in range(3):
        assert names.count(f"F{mb}") == 3 and names.count(f"B{mb}") == 3, (tid, mb, names)
    assert names.count("step") == 3
print("ok: trace has both stages, 3 steps x 3 micro-batches forward and backward")
PY
out=$(/usr/bin/python3 "$tool" trace.json -o trace.png)
echo "$out"
echo "$out" | grep -q "2 ranks, 3 steps; measured bubble 0\."
[ "$(head -c 8 trace.png | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] && echo "ok: PNG written"

# The residual network on 2 data ranks: the same timeline, and the communication table
# (one run loop for every model; --trace was refused for it before).
cat > resnet.toml <<'DECK'
[run]
steps = 2
log_every = 100
val_batches = 1
[model]
kind = "resnet"
steps = 4
width = 16
[data]
kind = "images"
batch_size = 8
[parallel]
data = 2
DECK
timeout 120 "$mpiexec" -n 2 "$strata" train resnet.toml --trace resnet.json > resnet.txt 2>&1 || { cat resnet.txt; exit 1; }
grep -q "wrote the timeline of every rank to resnet.json" resnet.txt
grep -q "^comm data     allreduce" resnet.txt || { cat resnet.txt; exit 1; }
/usr/bin/python3 -c "
import json
doc = json.load(open('resnet.json'))
steps = [e for e in doc['traceEvents'] if e['ph'] == 'X' and e['name'] == 'step']
assert sorted({e['tid'] for e in steps}) == [0, 1] and len(steps) == 4, steps
print('ok: the residual network has a timeline of both ranks and a communication table')"
