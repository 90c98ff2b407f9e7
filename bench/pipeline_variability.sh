#!/usr/bin/env bash
# Readiness-first dispatch against the fixed order under variability, side by side: the
# "small" deck on a pipeline of RANKS stages (one rank, one thread and one CPU each,
# pinned), m = 8 micro-batches, 1F1B and ZB-H1, each scenario's runs taking turns REPS
# times, STEPS steps each:
#   none      no variability (what readiness and the agreement cost);
#   uniform   every pass on every stage slowed by a seeded uniform 0-60% of its time;
#   spikes    stage 1's passes slowed 200% with chance 0.2;
#   burner    real contention: a process pinned beside stage 1 on its CPU, busy or idle
#             at random for 2-20 ms at a time;
#   throttle  a throttled node: stage 1's rank in a CPU cgroup (v2 cpu.max or v1
#             cpu.cfs_quota_us; root) whose quota switches at random every 50-500 ms
#             between 30% and 100% of a core (skipped, saying so, where no cgroup is
#             writable).
# Modes: order (parallel.dispatch = "order"), ready (the schedule's peak in flight), and
# ready+room (dispatch_in_flight = 2 x stages). Per run the median tokens/s of steps 3..;
# per scenario the best of the REPS runs of each mode and the ratios to order; then the
# simulator (strata plan --schedule --stage-costs) given the stage costs that scenario's
# first "order" run measured (its stages.csv; injected slowdowns are not in them, the
# scenario's draws are simulated) and the same draws: its ratios, and each mode's
# simulated step time over the measured one (the first of the REPS runs).
# The modes' turn rotates with each run of a scenario (order first, then ready first, ...),
# so that no mode always runs last, when the machine may have slowed. SCHEDULES and
# SCENARIOS (environment) choose the rows, e.g. SCENARIOS="throttle" SCHEDULES="zb-h1";
# SETS adds deck settings to every run, e.g. SETS="--set parallel.last_stage_layers=2".
# Usage: bench/pipeline_variability.sh [STRATA (build/release/bin/strata)] [RANKS (2)] [STEPS (10)] [REPS (2)]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/run_speed.sh
strata=${1:-build/release/bin/strata} ranks=${2:-2} steps=${3:-10} reps=${4:-2}
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
cores=$(env -u OMP_NUM_THREADS nproc)
out=$(mktemp -d)
burner_pid= cgroup=
cleanup() {
  [ -n "$burner_pid" ] && kill $burner_pid 2>/dev/null
  [ -n "$cgroup" ] && rmdir "$cgroup" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
deck=(inputs/bench-gpt-small.toml --threads 1 --set parallel.pipeline="$ranks" --set parallel.micro_batches=8
  --set run.steps="$steps" --set run.log_every=1 ${SETS:-})
declare -A variability=(
  [none]=""
  [uniform]="--set variability.slowdown_max=0.6"
  [spikes]="--set variability.slowdown_max=2 --set variability.draw=\"spikes\" --set variability.spike_chance=0.2 --set variability.stage=1"
  [burner]=""
  [throttle]="")
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
make_cgroup() {  # a CPU cgroup for stage 1 ("" where none can be made): v2, else v1
  local v2=/sys/fs/cgroup v1=/sys/fs/cgroup/cpu
  if grep -qw cpu $v2/cgroup.controllers 2>/dev/null && mkdir $v2/strata-throttle 2>/dev/null; then
    echo $v2/strata-throttle
  elif [ -w $v1 ] && mkdir $v1/strata-throttle 2>/dev/null; then
    echo $v1/strata-throttle
  fi
}
set_quota() {  # cgroup percent: the share of a core, per 10 ms period
  if [ -e "$1/cpu.max" ]; then echo "$(($2 * 100)) 10000" > "$1/cpu.max"
  else echo 10000 > "$1/cpu.cfs_period_us"; echo $(($2 * 100)) > "$1/cpu.cfs_quota_us"; fi
}
start_throttle() {  # the quota switching at random every 50-500 ms between 30% and 100%
  ( while true; do set_quota "$cgroup" $((30 + RANDOM % 71)); sleep "$(printf 0.%03d $((50 + RANDOM % 450)))"; done ) &
  burner_pid=$!
}
run() {  # schedule scenario mode rep: the median tokens/s
  local d=$out/$1-$2-$3-$4 into=
  [ "$2" = throttle ] && into=$cgroup
  # shellcheck disable=SC2086
  mpiexec -n "$ranks" bash -c '[ "$PMI_RANK" = 1 ] && [ -n "'"$into"'" ] && echo $$ > "'"$into"'/cgroup.procs"
    exec taskset -c $((PMI_RANK % '"$cores"')) "$0" "$@"' "$strata" train "${deck[@]}" \
    --set parallel.schedule="\"$1\"" ${variability[$2]} ${modes[$3]} --set run.out_dir="\"$d\"" > "$d.log" 2>&1 ||
    { echo "$1 $2 $3 FAILED" >&2; tail -3 "$d.log" >&2; exit 1; }
  median_speed "$(echo "$d"/*/metrics.csv)"
}
simulated() {  # schedule scenario: the simulated seconds per step of order, ready, ready+room
  # shellcheck disable=SC2086
  "$strata" plan "${deck[@]}" --schedule --set parallel.schedule="\"$1\"" ${variability[$2]} \
    --set parallel.dispatch=\"ready\" --set parallel.dispatch_in_flight=$((2 * ranks)) --stage-costs "$(echo "$out/$1-$2-order-1"/*/stages.csv)" |
    sed -nE 's/.*"order" ([0-9.e+-]+) s, "ready" ([0-9.e+-]+) s, "ready" with dispatch_in_flight = [0-9]+ ([0-9.e+-]+) s.*/\1 \2 \3/p'
}
step_seconds() {  # metrics.csv: the median ms_per_step of steps 3.. in seconds (the simulator's median)
  awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "ms_per_step") c = i; next } $1 >= 3 { print $c }' "$1" |
    sort -g | awk '{ v[NR] = $1 } END { print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2000 }'
}
echo "$(lscpu | sed -nE 's/^Model name: +//p'), $cores cores; $ranks stages, one rank and one thread each, m = 8, $steps steps, best of $reps${SETS:+; $SETS}"
cgroup=$(make_cgroup)
scenarios=${SCENARIOS:-none uniform spikes burner throttle}
if [ -z "$cgroup" ] && [[ " $scenarios " == *" throttle "* ]]; then
  scenarios=${scenarios/throttle/}
  echo "(no CPU cgroup can be made here: no throttle scenario)"
fi
turn=0
echo "| schedule | variability | order tok/s | ready tok/s | ready+room tok/s | ready / order | ready+room / order | simulated ready / order | simulated ready+room / order | simulated / measured step: order, ready, ready+room |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for schedule in ${SCHEDULES:-1f1b zb-h1}; do
  for scenario in $scenarios; do
    [ "$scenario" = burner ] && start_burner
    [ "$scenario" = throttle ] && start_throttle
    declare -A best=([order]=0 [ready]=0 [ready+room]=0)
    for rep in $(seq "$reps"); do
      all=(order ready ready+room)
      for i in 0 1 2; do
        mode=${all[$(((i + turn) % 3))]}
        s=$(run "$schedule" "$scenario" "$mode" "$rep")
        best[$mode]=$(echo "$s ${best[$mode]}" | awk '{ print ($1 > $2 ? $1 : $2) }')
      done
      turn=$((turn + 1))
    done
    if [ -n "$burner_pid" ]; then kill $burner_pid; wait $burner_pid 2>/dev/null || true; burner_pid=; fi
    read -r sim_order sim_ready sim_room <<<"$(simulated "$schedule" "$scenario")"
    measured=()
    for mode in order ready ready+room; do
      measured+=("$(step_seconds "$(echo "$out/$schedule-$scenario-$mode-1"/*/metrics.csv)")")
    done
    awk -v s="$schedule" -v v="$scenario" -v o="${best[order]}" -v r="${best[ready]}" -v rr="${best[ready+room]}" \
      -v so="$sim_order" -v sr="$sim_ready" -v srr="$sim_room" -v mo="${measured[0]}" -v mr="${measured[1]}" \
      -v mrr="${measured[2]}" 'BEGIN { printf "| %s | %s | %.0f | %.0f | %.0f | %.3f | %.3f | %.3f | %.3f | %.3f, %.3f, %.3f |\n",
        s, v, o, r, rr, r / o, rr / o, so / sr, so / srr, so / mo, sr / mr, srr / mrr }'
  done
done
