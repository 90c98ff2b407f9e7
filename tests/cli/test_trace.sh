#!/usr/bin/env bash
# --trace on a 2-stage 1F1B run writes a Chrome trace with one row per rank, every
# micro-batch's forward and backward on both stages, and tools/plot_trace.py draws it and
# measures the bubble. Under ready dispatch with stage 1 slowed to 3x its passes
# ([variability]), the run's summary names stage 1 as the slowest, stages.csv has both
# ranks' rows at every progress line with rank 1 computing longer, and the trace holds the
# injected waits on stage 1 only.
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

# The 3D split's overlap (parallel.tensor_overlap): with it, the depth group's gathers are
# in flight (the row of transfers in flight) while the products run; without it, never.
for overlap in true false; do
  timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml --set parallel.pipeline=1 --set parallel.micro_batches=1 \
    --set parallel.tensor_mode='"3d"' --set parallel.tensor_depth=2 --set parallel.tensor_overlap=$overlap \
    --set run.steps=2 --trace 3d_$overlap.json > 3d_$overlap.txt 2>&1 || { cat 3d_$overlap.txt; exit 1; }
  grep -q "^comm tensor_depth allgather" 3d_$overlap.txt || { cat 3d_$overlap.txt; exit 1; }
  /usr/bin/python3 - 3d_$overlap.json $overlap <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
on = sys.argv[2] == "true"
ev = [e for e in doc["traceEvents"] if e["ph"] == "X"]
for rank in (0, 1):
    products = [e for e in ev if e["tid"] == rank and e["cat"] == "product"]
    gathers = [e for e in ev if e["tid"] == 10000 + rank and e["name"] == "allgather tensor_depth"]
    scatters = [e for e in ev if e["tid"] == 10000 + rank and e["name"] == "reduce_scatter tensor_depth"]
    assert products and gathers and scatters, (rank, len(products), len(gathers), len(scatters))
    # Under a product: posted before the product started and not yet seen done when it
    # started. A transfer is seen done only by a wait or by the progress calls inside a
    # product, which come after the product's event begins, so this is the schedule's
    # structure and not a race: how long a transfer takes does not change it (a threshold
    # on the time in flight under the product did, with the machine busy).
    def under(t):
        return any(t["ts"] < p["ts"] < t["ts"] + t["dur"] for p in products)
    g, s = sum(map(under, gathers)), sum(map(under, scatters))
    # of a block's four gathers per pass, the first has no product before its use; of its
    # four weight gradients, the last reduce-scatter is completed with nothing after it
    if on:
        assert g == len(gathers) * 3 // 4 and s == len(scatters) * 3 // 4, (rank, g, len(gathers), s, len(scatters))
    else:
        assert g == 0 and s == 0, (rank, g, s)
    print(f"ok: rank {rank}, overlap {sys.argv[2]}: {g} of {len(gathers)} gathers and {s} of {len(scatters)} "
          "reduce-scatters in flight under a product")
PY
done
timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml --set parallel.dispatch=ready --set variability.stage=1 \
  --set variability.slowdown_min=2 --set variability.slowdown_max=2 --set run.log_every=1 --set run.name=slow \
  --trace slow.json > slow.txt 2>&1 || { cat slow.txt; exit 1; }
line=$(grep "^pipeline: " slow.txt) || { echo "FAIL: no pipeline summary line"; cat slow.txt; exit 1; }
echo "$line" | awk '{ r = $8; sub("x", "", r); exit !($2 == "stage" && $3 == 1 && $6 == 1 && r + 0 >= 1.3) }' ||
  { echo "FAIL: the summary does not name stage 1 (slowed 3x): $line"; exit 1; }
/usr/bin/python3 - <<'PY'
import csv, json
rows = list(csv.DictReader(open("runs/slow/stages.csv")))
assert [r["step"] for r in rows] == ["1", "1", "2", "2", "3", "3"], rows
for step in ("1", "2", "3"):
    r0, r1 = [r for r in rows if r["step"] == step]
    assert (r0["rank"], r0["stage"], r1["rank"], r1["stage"]) == ("0", "0", "1", "1"), rows
    assert float(r1["compute_s"]) > 1.5 * float(r0["compute_s"]), (step, r0, r1)
    # the passes apart, without the injected waits (twice each pass's own time on stage 1)
    passes = [float(r["forward_s"]) + float(r["backward_s"]) for r in (r0, r1)]
    assert 0 < passes[0] <= 1.000001 * float(r0["compute_s"]) and 0 < 2.5 * passes[1] < float(r1["compute_s"]), (step, r0, r1)
    assert r0["step_s"] == r1["step_s"] and float(r0["step_s"]) >= float(r0["compute_s"]), (step, r0, r1)
doc = json.load(open("slow.json"))
waits = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X" and e.get("cat") == "injected_delay"}
assert waits == {1}, waits
print("ok: stage 1 slowed 3x is named slowest, computes longest in stages.csv, and its waits are on its trace row")
PY
echo "ok: $line"
# the simulator given the stage costs the run measured: stage 1 slowed 3x in the simulation
# as in the run, its pipeline (the step less the time outside it) more than twice as long
# as without slowdowns (m = 3: about 10 against 4 passes' time)
plan=(plan deck.toml --schedule --stage-costs runs/slow/stages.csv)
simulated() {
  "$strata" "${plan[@]}" "$@" | sed -nE -e 's/.* outside the pipeline ([0-9.e+-]+) s per step$/\1/p' \
    -e 's/^simulated step under .*: "order" ([0-9.e+-]+) s, "ready" ([0-9.e+-]+) s.*/\1 \2/p' | tr '\n' ' '
}
read -r outside slow_order slow_ready <<<"$(simulated --set variability.stage=1 --set variability.slowdown_min=2 \
  --set variability.slowdown_max=2)"
read -r outside plain_order plain_ready <<<"$(simulated)"
awk -v o="$outside" -v a="$slow_order" -v b="$slow_ready" -v c="$plain_order" -v d="$plain_ready" \
  'BEGIN { exit !(c > o && d > o && a - o > 2 * (c - o) && b - o > 2 * (d - o)) }' ||
  { echo "FAIL: simulated from stages.csv: slowed $slow_order $slow_ready, plain $plain_order $plain_ready"; exit 1; }
"$strata" "${plan[@]}" --set parallel.pipeline=1 > wrong.txt 2>&1 && { echo "FAIL: 2 stages' costs taken for 1"; exit 1; }
grep -q "has stage 1; the deck has 1 stages" wrong.txt || { cat wrong.txt; exit 1; }
"$strata" "${plan[@]}" --set parallel.schedule=xpipe > wrong.txt 2>&1 && { echo "FAIL: xpipe simulated per step"; exit 1; }
grep -q "xpipe's list never flushes" wrong.txt || { cat wrong.txt; exit 1; }
echo "ok: plan --stage-costs simulates the run's measured stages ($slow_order s slowed, $plain_order s plain)"
