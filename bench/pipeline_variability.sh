#!/usr/bin/env bash
# Readiness-first dispatch against the fixed order under variability, side by side: the
# "small" deck on a pipeline of RANKS stages (one rank, one thread and one CPU each,
# pinned), m = 8 micro-batches, 1F1B and ZB-H1, each scenario's runs taking turns REPS
# times, STEPS steps each:
#   none      no variability (what readiness and the agreement cost);
#   uniform   every pass on every stage slowed by a seeded uniform 0-60% of its time;
#   spikes    stage 1's passes slowed 200% with chance 0.2;
#   burner    real contention: a process pinned beside stage 1 on its CPU, busy or idle
#             at random for 2-20 ms at a time.
# Modes: order (parallel.dispatch = "order"), ready (the schedule's peak in flight), and
# ready+room (dispatch_in_flight = 2 x stages). Per run the median tokens/s of steps 3..;
# per scenario the best of the REPS runs of each mode, the ratios to order, and the
# simulator's ratio for the same draws (strata plan --schedule; unit costs F = 1, B = 2;
# not for the burner, nor without variability).
# Usage: bench/pipeline_variability.sh [STRATA (build/release/bin/strata)] [RANKS (2)] [STEPS (10)] [REPS (2)]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/run_speed.sh
strata=${1:-build/release/bin/strata} ranks=${2:-2} steps=${3:-10} reps=${4:-2}
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
cores=$(env -u OMP_NUM_THREADS nproc)
out=$(mktemp -d)
burner_pid=
trap '[ -n "$burner_pid" ] && kill $burner_pid 2>/dev/null; rm -rf "$out"' EXIT
deck=(inputs/bench-gpt-small.toml --threads 1 --set parallel.pipeline="$ranks" --set parallel.micro_batches=8
  --set run.steps="$steps" --set run.log_every=1)
declare -A variability=(
  [none]=""
  [uniform]="--set variability.slowdown_max=0.6"
  [spikes]="--set variability.slowdown_max=2 --set variability.draw=\"spikes\" --set variability.spike_chance=0.2 --set variability.stage=1"
  [burner]="")
declare -A modes=(
  [order]=""
  [ready]="--set parallel.dispatch=\"ready\""
  [ready+room]="--set parallel.dispatch=\"ready\" --set parallel.dispatch_in_flight=$((2 * ranks))")
start_burner() {  # on stage 1's CPU
  taskset -c $((1 % cores)) python3 -c '
import random, time
while True:
    until = time.time() + random.uniform(0.002, 0.02)
    if random.random() < 0.5:
        while time.time() < until: pass
    else:
        time.sleep(max(0.0, until - time.time()))' &
  burner_pid=$!
}
run() {  # schedule scenario mode rep: the median tokens/s
  local d=$out/$1-$2-$3-$4
  # shellcheck disable=SC2086
  mpiexec -n "$ranks" bash -c 'exec taskset -c $((PMI_RANK % '"$cores"')) "$0" "$@"' "$strata" train "${deck[@]}" \
    --set parallel.schedule="\"$1\"" ${variability[$2]} ${modes[$3]} --set run.out_dir="\"$d\"" > "$d.log" 2>&1 ||
    { echo "$1 $2 $3 FAILED" >&2; tail -3 "$d.log" >&2; exit 1; }
  median_speed "$(echo "$d"/*/metrics.csv)"
}
simulated() {  # schedule scenario: the simulator's ready / order, ready+room / order
  [ "$2" = burner ] || [ "$2" = none ] && { echo "- -"; return; }  # (none: the same makespan, unit costs)
  # shellcheck disable=SC2086
  "$strata" plan "${deck[@]}" --schedule --set parallel.schedule="\"$1\"" ${variability[$2]} 2>/dev/null |
    sed -nE 's/.*"ready" is ([0-9.]+)x "order", ([0-9.]+)x with room.*/\1 \2/p'
}
echo "$(lscpu | sed -nE 's/^Model name: +//p'), $cores cores; $ranks stages, one rank and one thread each, m = 8, $steps steps, best of $reps"
echo "| schedule | variability | order tok/s | ready tok/s | ready+room tok/s | ready / order | ready+room / order | simulated ready / order | simulated ready+room / order |"
echo "|---|---|---|---|---|---|---|---|---|"
for schedule in 1f1b zb-h1; do
  for scenario in none uniform spikes burner; do
    [ "$scenario" = burner ] && start_burner
    declare -A best=([order]=0 [ready]=0 [ready+room]=0)
    for rep in $(seq "$reps"); do
      for mode in order ready ready+room; do
        s=$(run "$schedule" "$scenario" "$mode" "$rep")
        best[$mode]=$(echo "$s ${best[$mode]}" | awk '{ print ($1 > $2 ? $1 : $2) }')
      done
    done
    if [ -n "$burner_pid" ]; then kill $burner_pid; wait $burner_pid 2>/dev/null || true; burner_pid=; fi
    read -r sim_ready sim_room <<<"$(simulated "$schedule" "$scenario")"
    awk -v s="$schedule" -v v="$scenario" -v o="${best[order]}" -v r="${best[ready]}" -v rr="${best[ready+room]}" \
      -v a="$sim_ready" -v b="$sim_room" \
      'BEGIN { printf "| %s | %s | %.0f | %.0f | %.0f | %.3f | %.3f | %s | %s |\n", s, v, o, r, rr, r / o, rr / o, a, b }'
  done
done
