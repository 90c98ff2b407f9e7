#!/usr/bin/env bash
# Faults of the kind a cluster produces, through the real executable on 2 ranks. Each
# scenario asserts the exit code, the one-line message, a bound on the time from the fault
# to the job's end, and what survives: the newest good checkpoint is LATEST, verifies
# (strata inspect) and restarts to the uninterrupted run's losses.
#   I/O errors (LD_PRELOAD shim: write, fsync, rename failing on one rank or all; in
#   `strata export` too), a full
#   file system (a small tmpfs, when this runs as root), divergence (stop and skip), a
#   rank-local error after set-up, kill -9 of one rank inside a checkpoint write, SIGTERM
#   to a job stuck in a collective (watchdog, second signal), XPipe's stop latency, LATEST
#   lost or dangling, a model mismatch, two runs on one directory, a fresh start over
#   checkpoints; a rank-local error under ZB-H1, inside ring attention (context 2) and inside
#   a mixture layer's all-to-all (expert 2), a failed write with the experts split over
#   the ranks (a restart from the surviving checkpoint reproduces the losses), and a
#   failed write under interleaved 1F1B and under context 2 with ZeRO-1; under the 3D split
#   (depth 2) a rank-local error and a failed write; under ZeRO-3 a rank-local error (the
#   other rank in a parameter gather) and kill -9 inside a step and inside a checkpoint
#   write (the newest checkpoint restarts on one rank); under readiness-first dispatch a
#   rank-local error while the other rank waits on its ready set, and SIGTERM with a
#   checkpoint that restarts under the fixed order and onto data parallelism;
#   a token shard that cannot be written during strata tokenize.
# Usage: test_faults.sh STRATA MPIEXEC SHIM.so
set -u
here=$(cd "$(dirname "$0")" && pwd)
strata=$1
mpiexec=$2
shim=$3
source "$here/../support/test_lib.sh"
cd "$work"
marker="strata-fault-test-$$"  # in every job's command line, so only this test's processes are touched
on_exit "pkill -9 -f '$marker' 2>/dev/null; umount '$work/tmpfs' 2>/dev/null"

cp "$here/../support/ckpt-deck.toml" deck.toml
out=runs-$marker
# run NAME [strata args...]; extra environment for the ranks in $RANK_ENV
run() {
  local name=$1
  shift
  timeout 120 "$mpiexec" -n 2 env ${RANK_ENV:-} "$strata" train deck.toml --set run.out_dir=$out --set run.name=$name "$@"
}
now() { date +%s.%N; }
elapsed() { echo "$(now) - $1" | bc; }
within() { [ "$(echo "$1 <= $2" | bc)" = 1 ]; }  # seconds bound
pid_of_rank() {  # NAME RANK: the pid of that rank of this test's job running run.name=NAME
  for p in $(pgrep -x strata); do   # (its out_dir names this test: another suite's may run beside it)
    { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -qx "PMI_RANK=$2" &&
      { tr '\0' ' ' </proc/$p/cmdline; } 2>/dev/null | grep -q -- "run.out_dir=$out --set run.name=$1 " && echo $p
  done | head -1
}
wait_for() {  # file pattern seconds
  for _ in $(seq 1 $(($3 * 10))); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
same_losses() { same_rows $out/full/metrics.csv $out/$1/metrics.csv; }

# survives NAME LATEST [killed]: LATEST names that file, no temporary file is left (unless
# the job was killed inside the write), it verifies, and a restart from it reproduces
# every loss of the uninterrupted run
survives() {
  local d=$out/$1/checkpoints
  if [ "$(cat $d/LATEST 2>/dev/null)" != "$2" ] || { [ -z "${3:-}" ] && ls $d | grep -q '\.tmp$'; }; then
    fail "$1: LATEST is '$(cat $d/LATEST 2>/dev/null)', wanted $2; files: $(ls $d | tr '\n' ' ')"
    return
  fi
  timeout 60 "$strata" inspect $d/$2 2>&1 | grep -q "all checksums ok" || { fail "$1: $2 does not verify"; return; }
  if run $1 --restart latest >$1-restart.log 2>&1 && same_losses $1; then
    ok "$1: $2 is LATEST, verifies, and the restart reproduces the uninterrupted run's losses"
  else
    fail "$1: the restart from $2"; tail -3 $1-restart.log
  fi
}

# fault NAME CODE TEXT SECONDS [strata args...]: the job exits with CODE within SECONDS,
# and stderr holds TEXT on a "strata: error" line
fault() {
  local name=$1 code=$2 text=$3 bound=$4
  shift 4
  local t0 rc took
  t0=$(now)
  run $name "$@" >$name.out 2>$name.err
  rc=$?
  took=$(elapsed $t0)
  if [ $rc -eq $code ] && grep "strata: error" $name.err | grep -qF -- "$text" && within $took $bound; then
    ok "$name: exit $code in $(printf %.1f $took) s: $(grep -m1 'strata: error' $name.err | cut -c1-150)"
  else
    fail "$name: exit $rc (wanted $code) after $(printf %.1f $took) s (bound $bound), wanted '$text'; stderr:"
    sed 's/^/    /' $name.err | head -8
  fi
}

# A failed checkpoint write on rank 1 at step 8 (EIO) of a run with ARGS: exit 4, the
# step-4 checkpoint LATEST and verified, and the restart from it reproduces the losses of
# the uninterrupted run (NAME-full). Usage: write_fault_restarts NAME WHAT ARGS...
write_fault_restarts() {
  local name=$1 what=$2
  shift 2
  run $name-full "$@" >$name-full.log 2>&1 || { fail "the uninterrupted $what run"; tail -3 $name-full.log; }
  RANK_ENV="LD_PRELOAD=$shim STRATA_FAULT_OP=write STRATA_FAULT_ERRNO=EIO STRATA_FAULT_RANK=1 STRATA_FAULT_PATH=ckpt_00000008" \
    fault $name-write 4 "checkpoint ckpt_00000008.h5 not published: rank 1: MPI-IO on" 20 "$@"
  if [ "$(cat $out/$name-write/checkpoints/LATEST)" = ckpt_00000004.h5 ] &&
     timeout 60 "$strata" inspect $out/$name-write/checkpoints/ckpt_00000004.h5 2>&1 | grep -q "all checksums ok" &&
     run $name-write --restart latest "$@" >$name-write-restart.log 2>&1 &&
     same_rows $out/$name-full/metrics.csv $out/$name-write/metrics.csv; then
    ok "$name-write: ckpt_00000004.h5 is LATEST, verifies, and the restart reproduces the $what run's losses"
  else
    fail "$name-write: LATEST $(cat $out/$name-write/checkpoints/LATEST), restart:"; tail -3 $name-write-restart.log
  fi
}

# --- the reference: uninterrupted
run full >full.log 2>&1 || { fail "the uninterrupted run"; cat full.log; }

# --- I/O errors at the step-8 checkpoint, injected by the shim
io_fault() {  # NAME OP ERRNO RANK TEXT
  RANK_ENV="LD_PRELOAD=$shim STRATA_FAULT_OP=$2 STRATA_FAULT_ERRNO=$3 STRATA_FAULT_RANK=$4 STRATA_FAULT_PATH=ckpt_00000008" \
    fault $1 4 "$5" 20
  survives $1 ckpt_00000004.h5
}
io_fault write-rank1 write EIO 1 "checkpoint ckpt_00000008.h5 not published: rank 1: MPI-IO on"
io_fault nospace-rank0 write ENOSPC 0 "No space left on device"
io_fault fsync-all fsync EIO "" "fsync: Input/output error"
io_fault quota-rename rename EDQUOT 0 "cannot rename $out/quota-rename/checkpoints/ckpt_00000008.h5.tmp"
[ "$(grep -c 'strata: error' quota-rename.err)" -eq 1 ] && ok "an error all ranks agree on is one line" ||
  fail "quota-rename printed $(grep -c 'strata: error' quota-rename.err) error lines"

# --- ZeRO-1: each rank writes its block of the moments as a union of hyperslabs; a failed
# write on rank 1 there ends the job the same way, and the step-4 checkpoint stays LATEST
# and verifies
RANK_ENV="LD_PRELOAD=$shim STRATA_FAULT_OP=write STRATA_FAULT_ERRNO=EIO STRATA_FAULT_RANK=1 STRATA_FAULT_PATH=ckpt_00000008" \
  fault zero-write 4 "checkpoint ckpt_00000008.h5 not published: rank 1: MPI-IO on" 20 --set parallel.zero=1
[ "$(cat $out/zero-write/checkpoints/LATEST)" = ckpt_00000004.h5 ] &&
  timeout 60 "$strata" inspect $out/zero-write/checkpoints/ckpt_00000004.h5 2>&1 | grep -q "all checksums ok" &&
  ok "zero-write: ckpt_00000004.h5 is LATEST and verifies" || fail "zero-write: LATEST $(cat $out/zero-write/checkpoints/LATEST)"
# ... and with each sequence over the two ranks (context 2: the replica group that shares
# the writing and ZeRO-1's blocks is the context group)
RANK_ENV="LD_PRELOAD=$shim STRATA_FAULT_OP=write STRATA_FAULT_ERRNO=EIO STRATA_FAULT_RANK=1 STRATA_FAULT_PATH=ckpt_00000008" \
  fault context-write 4 "checkpoint ckpt_00000008.h5 not published: rank 1: MPI-IO on" 20 \
  --set parallel.data=1 --set parallel.context=2 --set parallel.zero=1
[ "$(cat $out/context-write/checkpoints/LATEST)" = ckpt_00000004.h5 ] &&
  timeout 60 "$strata" inspect $out/context-write/checkpoints/ckpt_00000004.h5 2>&1 | grep -q "all checksums ok" &&
  ok "context-write: ckpt_00000004.h5 is LATEST and verifies" ||
  fail "context-write: LATEST $(cat $out/context-write/checkpoints/LATEST)"
# ... and with the experts split over the two ranks (expert 2, ZeRO-1: each rank writes its
# own experts' tensors and its block of the others' moments): the step-4 checkpoint stays
# LATEST, verifies, and the restart from it reproduces the uninterrupted run's losses
write_fault_restarts expert "expert-parallel" --set model.moe_experts=4 --set model.moe_every=1 \
  --set parallel.expert=2 --set parallel.zero=1

# --- the zero-bubble and interleaved pipelines (the backward's halves, several chunks per
# stage): a rank-local error on stage 1 ends both ranks; a failed checkpoint write on rank
# 1 under interleaved 1F1B leaves the step-4 checkpoint LATEST, verified, and a restart
# from it reproduces the uninterrupted interleaved run's losses
zb=(--set parallel.data=1 --set parallel.pipeline=2 --set parallel.schedule=zb-h1 --set parallel.micro_batches=4)
fault zb-rank-error 1 "rank 1: internal error: injected fault: a rank-local error before step 6" 15 "${zb[@]}" --inject-fault error:6:1
# ... and with each sequence split over the two ranks: rank 0 waits inside ring attention
# for keys and values rank 1 never sends
ctx=(--set parallel.data=1 --set parallel.context=2)
fault context-rank-error 1 "rank 1: internal error: injected fault: a rank-local error before step 6" 15 "${ctx[@]}" --inject-fault error:6:1
# ... and with the experts split over the two ranks: rank 0 waits inside a mixture layer's
# all-to-all for the rows rank 1 never sends
moe=(--set parallel.data=2 --set parallel.expert=2 --set model.moe_experts=4 --set model.moe_every=1)
fault expert-rank-error 1 "rank 1: internal error: injected fault: a rank-local error before step 6" 15 "${moe[@]}" --inject-fault error:6:1
# ... and under the 3D split: rank 0 waits in the depth group's weight gather that rank 1
# never joins; a failed write of the depth-sharded weights leaves the step-4 checkpoint
# LATEST, verified, and the restart reproduces the uninterrupted 3D run's losses
three_d=(--set parallel.data=1 --set parallel.tensor_mode=3d --set parallel.tensor_depth=2)
fault three-d-rank-error 1 "rank 1: internal error: injected fault: a rank-local error before step 6" 15 "${three_d[@]}" --inject-fault error:6:1
write_fault_restarts three-d "3D" "${three_d[@]}"
# ... and under ZeRO-3: rank 0 waits in the embedding's parameter gather that rank 1 never
# joins (ZeRO-2/3 checkpoints' restarts: tests/optim/test_zero_sharded.cpp)
fault zero3-rank-error 1 "rank 1: internal error: injected fault: a rank-local error before step 6" 15 --set parallel.data=2 --set parallel.zero=3 --inject-fault error:6:1

# --- readiness-first dispatch (2 stages, 1F1B, slowdowns injected): a rank-local error on
# stage 1 while stage 0 waits on its ready set for any of stage 1's messages ends both
# ranks; SIGTERM to rank 0 stops both at a step boundary with a checkpoint, which restarts
# under dispatch = "order" to the uninterrupted run's losses bit for bit, and onto data
# parallelism (no pipeline) to them within float rounding
rates=(--set optim.lr=1e-3 --set optim.min_lr=1e-3 --set optim.warmup_steps=0)  # the same whatever run.steps
ready=(--set parallel.data=1 --set parallel.pipeline=2 --set parallel.micro_batches=4 --set parallel.dispatch=ready
  --set variability.slowdown_max=1 "${rates[@]}")
fault ready-rank-error 1 "rank 1: internal error: injected fault: a rank-local error before step 6" 15 "${ready[@]}" --inject-fault error:6:1
run ready-term "${ready[@]}" --set run.steps=100000 --set run.checkpoint_every=0 >ready-term.log 2>&1 &
job=$!
if wait_for ready-term.log "step     3/" 60; then
  kill -TERM "$(pid_of_rank ready-term 0)"
  wait $job
  rc=$?
  step=$(sed -nE 's/.*stopping after step ([0-9]+) of 100000 .*/\1/p' ready-term.log)
  pipe=(--set parallel.data=1 --set parallel.pipeline=2 --set parallel.micro_batches=4 "${rates[@]}")
  if [ $rc -eq 0 ] && [ -n "$step" ] && [ "$(cat $out/ready-term/checkpoints/LATEST)" = "$(printf 'ckpt_%08d.h5' "$step")" ]; then
    steps=(--set run.steps=$((step + 2)) --set run.checkpoint_every=0 "${rates[@]}")
    run ready-ref "${pipe[@]}" "${steps[@]}" >ready-ref.log 2>&1
    cp -r $out/ready-term $out/ready-data
    run ready-term "${pipe[@]}" "${steps[@]}" --restart latest >ready-order.log 2>&1
    run ready-data "${steps[@]}" --restart latest >ready-data.log 2>&1
    ref=$(tail -2 $out/ready-ref/metrics.csv | cut -d, -f1,2)
    if [ -n "$ref" ] && [ "$(tail -2 $out/ready-term/metrics.csv | cut -d, -f1,2)" = "$ref" ]; then
      ok "ready: SIGTERM stopped at step $step with a checkpoint; restarted under \"order\", steps $((step + 1))-$((step + 2)) repeat the uninterrupted run's losses bit for bit"
    else
      fail "ready: the restart under order: $(tail -2 $out/ready-term/metrics.csv | cut -d, -f2 | tr '\n' ' ') against $(echo "$ref" | cut -d, -f2 | tr '\n' ' ')"
    fi
    if paste -d, <(tail -2 $out/ready-ref/metrics.csv | cut -d, -f2) <(tail -2 $out/ready-data/metrics.csv | cut -d, -f2) |
       awk -F, 'NF == 2 && $1 != "" { n++; d = ($1 - $2) / $1; if (d < -1e-6 || d > 1e-6) bad = 1 } END { exit !(n == 2 && !bad) }'; then
      ok "ready: the same checkpoint restarts onto data parallelism (no pipeline) to the uninterrupted losses within 1e-6"
    else
      fail "ready: the restart onto data parallelism"; tail -3 ready-data.log
    fi
  else
    fail "ready: SIGTERM: exit $rc, step '$step'"; tail -5 ready-term.log
  fi
else
  fail "ready: the run never started"; kill -9 $job
fi

# --- ZeRO-3 (data 2): kill -9 of one rank inside a checkpoint write (rank 1, paused at
# step 8) and inside a step (rank 0, waiting inside step 6 for rank 1,
# which the injected fault holds before it): the job ends, ckpt_00000004.h5 is LATEST and
# verifies, and one rank without ZeRO restarts from it to the uninterrupted run's losses
# (1e-5: another layout's sums)
zero3_killed() {  # NAME WHAT PATTERN RANK FAULT: kill RANK once the log shows PATTERN
  local name=$1 what=$2 pattern=$3 rank=$4 job rc took t0
  run $name --set parallel.zero=3 --inject-fault "$5" >$name.log 2>&1 &
  job=$!
  if ! wait_for $name.log "$pattern" 60; then
    fail "$name: never reached '$pattern'"; kill -9 $job; return
  fi
  t0=$(now)
  kill -9 "$(pid_of_rank $name $rank)"
  wait $job
  rc=$?
  took=$(elapsed $t0)
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && within $took 15 && ok "$name: kill -9 of rank $rank $what: the job ends (exit $rc) in $(printf %.1f $took) s" ||
    { fail "$name: kill -9 $what: exit $rc after $took s"; return; }
  local d=$out/$name/checkpoints
  [ "$(cat $d/LATEST 2>/dev/null)" = ckpt_00000004.h5 ] && timeout 60 "$strata" inspect $d/ckpt_00000004.h5 2>&1 | grep -q "all checksums ok" ||
    { fail "$name: LATEST is '$(cat $d/LATEST 2>/dev/null)' or does not verify"; return; }
  if timeout 120 "$strata" train deck.toml --set run.out_dir=$out --set run.name=$name --set parallel.data=1 \
       --restart latest >$name-restart.log 2>&1 &&
     "$here/../../scripts/compare-losses.sh" $out/full/metrics.csv $out/$name/metrics.csv 1e-5 1e-5 >$name-compare.log; then
    ok "$name: ckpt_00000004.h5 is LATEST, verifies, and restarts on one rank without ZeRO to the losses ($(cat $name-compare.log))"
  else
    fail "$name: the one-rank restart"; tail -3 $name-restart.log $name-compare.log
  fi
}
zero3_killed zero3-kill9-write "inside a checkpoint write" "pausing inside the checkpoint write" 1 \
  pause-checkpoint:8
zero3_killed zero3-kill9-step "inside step 6" "rank 1 hangs before step 6" 0 hang:6:1
inter=(--set model.n_layer=4 --set parallel.data=1 --set parallel.pipeline=2 --set parallel.schedule=interleaved
       --set parallel.virtual_stages=2 --set parallel.micro_batches=4)
write_fault_restarts inter "interleaved" "${inter[@]}"

# --- metrics.csv stops taking rows mid-run (the header and 6 rows pass): the run stops
# with a checkpoint at the next step and exit 4
RANK_ENV="LD_PRELOAD=$shim STRATA_FAULT_OP=write STRATA_FAULT_RANK=0 STRATA_FAULT_PATH=metrics.csv STRATA_FAULT_AFTER=7" \
  fault metrics-full 4 "metrics.csv: a row could not be written: Input/output error (stopped after step 7, with a checkpoint)" 20
[ "$(cat $out/metrics-full/checkpoints/LATEST)" = ckpt_00000007.h5 ] && ok "metrics-full: the stop wrote ckpt_00000007.h5" ||
  fail "metrics-full: LATEST is $(cat $out/metrics-full/checkpoints/LATEST)"

# --- the same run loop for the layer-parallel residual network: a failed fsync, divergence
cp "$here/../support/resnet-ckpt-deck.toml" resnet.toml
resnet=(--set run.steps=8 --set run.checkpoint_every=4 --set run.out_dir=$out --set run.name=resnet)
t0=$(now)
timeout 60 "$mpiexec" -n 2 env LD_PRELOAD=$shim STRATA_FAULT_OP=fsync STRATA_FAULT_PATH=ckpt_00000008 "$strata" train resnet.toml \
  "${resnet[@]}" >resnet.out 2>resnet.err
rc=$?
[ $rc -eq 4 ] && grep -q "strata: error: checkpoint ckpt_00000008.h5 not published: rank .: MPI-IO on .* failed: fsync: Input/output error" resnet.err &&
  [ "$(cat $out/resnet/checkpoints/LATEST)" = ckpt_00000004.h5 ] &&
  ok "resnet (MGRIT): a failed fsync: exit 4 in $(printf %.1f $(elapsed $t0)) s, LATEST still ckpt_00000004.h5" ||
  { fail "resnet fsync: exit $rc"; cat resnet.err; }
timeout 60 "$mpiexec" -n 2 "$strata" train resnet.toml "${resnet[@]}" --restart latest \
  --set optim.lr=1e30 --set optim.grad_clip=0 --set run.steps=16 >resnet2.out 2>resnet2.err
rc=$?
[ $rc -eq 5 ] && grep -q "strata: error: .*nan" resnet2.err && [ "$(cat $out/resnet/checkpoints/LATEST)" = ckpt_00000004.h5 ] &&
  ok "resnet (MGRIT): divergence after the restart: exit 5, LATEST still ckpt_00000004.h5" ||
  { fail "resnet divergence: exit $rc"; cat resnet2.err; tail -3 resnet2.out; }

# --- a full file system: room for the step-4 checkpoint, not for the step-8 one
size=$(stat -c %s $out/full/checkpoints/ckpt_00000012.h5)
mkdir -p tmpfs
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=$(( (1048576 + size * 16 / 10) / 1024 ))k tmpfs tmpfs 2>/dev/null; then
  t0=$(now)
  timeout 60 "$mpiexec" -n 2 "$strata" train deck.toml --set run.out_dir=tmpfs --set run.name=$marker >tmpfs.out 2>tmpfs.err
  rc=$?
  if [ $rc -eq 4 ] && grep -q "strata: error: checkpoint ckpt_00000008.h5 not published: rank 0: no room: it needs about" tmpfs.err &&
     [ "$(cat tmpfs/$marker/checkpoints/LATEST)" = ckpt_00000004.h5 ] && ! ls tmpfs/$marker/checkpoints | grep -q tmp; then
    ok "full file system: refused before writing, exit 4 in $(printf %.1f $(elapsed $t0)) s: $(cut -c1-150 tmpfs.err)"
  else
    fail "full file system: exit $rc"; cat tmpfs.err; ls -l tmpfs/$marker/checkpoints
  fi
  umount tmpfs
else
  echo "skipped: the full-file-system case needs root to mount a tmpfs"
fi

# --- divergence after a restart: nothing published, nothing pruned
cp -r $out/full $out/diverge
before=$(ls $out/diverge/checkpoints | tr '\n' ' ')
# (whichever comes first: a step's non-finite loss, or the checkpoint's non-finite validation loss)
fault diverge 5 "nan" 20 --restart $out/diverge/checkpoints/ckpt_00000008.h5 --set optim.lr=1e10 \
  --set optim.warmup_steps=0 --set optim.grad_clip=0 --set run.checkpoint_every=1
[ "$(ls $out/diverge/checkpoints | tr '\n' ' ')" = "$before" ] && [ "$(cat $out/diverge/checkpoints/LATEST)" = ckpt_00000012.h5 ] &&
  ok "diverge: every checkpoint is still there and LATEST unchanged" || fail "diverge: checkpoints now $(ls $out/diverge/checkpoints)"
cp -r $out/full $out/skip
fault skip 5 "3 steps in a row skipped (run.max_skipped_steps)" 20 --restart $out/skip/checkpoints/ckpt_00000008.h5 \
  --set optim.lr=1e10 --set optim.warmup_steps=0 --set optim.grad_clip=0 --set run.on_nonfinite=skip --set run.max_skipped_steps=3
grep -q "skipped (run.on_nonfinite = \"skip\")" skip.err && ok "skip: each skipped step is logged" || fail "skip: no warnings"

# --- a rank-local error after set-up ends every rank
fault rank-error 1 "rank 1: internal error: injected fault: a rank-local error before step 6" 15 --inject-fault error:6:1
survives rank-error ckpt_00000004.h5

# --- kill -9 of one rank inside the step-8 checkpoint write
run kill9 --inject-fault pause-checkpoint:8 >kill9.log 2>&1 &
job=$!
if wait_for kill9.log "pausing inside the checkpoint write" 60; then
  t0=$(now)
  kill -9 "$(pid_of_rank kill9 1)"
  wait $job
  rc=$?
  took=$(elapsed $t0)
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && within $took 15 && ok "kill -9 of rank 1 mid-write: the job ends (exit $rc) in $(printf %.1f $took) s" ||
    fail "kill -9 mid-write: exit $rc after $took s"
  survives kill9 ckpt_00000004.h5 killed
else
  fail "kill9: the injected pause never came"; kill -9 $job
fi

# --- SIGTERM to a job stuck in a collective: rank 1 hangs before step 6 (or with at=0 in
# the set-up, before the job is built), rank 0 waits in it
stuck() {  # NAME SIGNALS... : signals go to both ranks, 2.5 s apart
  local name=$1 at=${at:-6} where="before step ${at:-6}"
  [ "$at" = 0 ] && where="in the set-up"
  shift
  run $name --set run.stop_timeout=$stop_timeout --inject-fault hang:$at:1 >$name.out 2>$name.err &
  local job=$! t0
  wait_for $name.err "rank 1 hangs $where" 60 || { fail "$name: never hung"; kill -9 $job; return; }
  # (in the set-up: rank 0 says when it is there, past where its stop requests are taken)
  [ "$at" != 0 ] || wait_for $name.err "rank 0 is at the set-up" 60 || { fail "$name: rank 0 never at the set-up"; kill -9 $job; return; }
  # (rank 0 is stuck from here whether it has entered step 6's collective yet or not: the
  # stop agreement it would reach first is a collective too)
  local first=1
  for s in "$@"; do
    # not a wait for an event: a repeat within 2 s is taken for the launcher delivering the
    # first request twice (stop_signals.cpp), so a second request must come later
    [ $first = 1 ] || sleep 2.5
    first=0
    t0=$(now)  # the time to the end counts from the last signal
    kill -$s "$(pid_of_rank $name 0)" "$(pid_of_rank $name 1)"
  done
  wait $job
  echo "$? $(elapsed $t0)" >$name.rc
}
stop_timeout=3 stuck watchdog TERM
read rc took <watchdog.rc
# (exit 143, each rank's watchdog ending it; or 9 where one rank's watchdog fired first and
# the launcher killed the other before its own did: seen under load, with a bash trace)
{ [ "$rc" = 143 ] || [ "$rc" = 9 ]; } && within $took 8 &&
  grep -q "SIGTERM asked to stop 3 s ago, but this rank never reached a step boundary" watchdog.err &&
  ok "SIGTERM to a stuck job: the watchdog ends it (exit $rc) in $(printf %.1f $took) s" || { fail "watchdog: exit $rc after $took s"; cat watchdog.err; }
survives watchdog ckpt_00000004.h5
# stuck in the set-up (an allocation a library retries for ever, a stalled file system):
# the watchdog the train command makes before the job is built ends it the same way
at=0 stop_timeout=3 stuck setup TERM
read rc took <setup.rc
{ [ "$rc" = 143 ] || [ "$rc" = 9 ]; } && within $took 8 &&
  grep -q "SIGTERM asked to stop 3 s ago, but this rank never reached a step boundary (stuck in the set-up" setup.err &&
  ok "SIGTERM to a job stuck in its set-up: the watchdog ends it (exit $rc) in $(printf %.1f $took) s" || { fail "set-up watchdog: exit $rc after $took s"; cat setup.err; }
stop_timeout=600 stuck second TERM TERM
read rc took <second.rc
[ "$rc" = 143 ] && within $took 4 && grep -q "second SIGTERM: exiting at once, without a checkpoint" second.err &&
  ok "a second SIGTERM ends a stuck job at once (exit 143, $(printf %.1f $took) s after it)" || { fail "second signal: exit $rc after $took s"; cat second.err; }
# SIGHUP (a closed session, a launcher's hang-up) is a stop request like the others: after a
# SIGTERM, a SIGHUP is the second request
stop_timeout=600 stuck hangup TERM HUP
read rc took <hangup.rc
[ "$rc" = 129 ] && within $took 4 && grep -q "second SIGHUP: exiting at once, without a checkpoint" hangup.err &&
  ok "a SIGHUP after a SIGTERM ends a stuck job at once (exit 129, $(printf %.1f $took) s after it)" || { fail "SIGHUP after SIGTERM: exit $rc after $took s"; cat hangup.err; }

# --- XPipe looks at stop requests inside its streams
xpipe=(--set parallel.data=1 --set parallel.pipeline=2 --set parallel.schedule=xpipe --set parallel.micro_batches=2
       --set run.steps=100000 --set run.log_every=100000 --set run.checkpoint_every=0)
run xpipe "${xpipe[@]}" >xpipe.log 2>&1 &
job=$!
if wait_for xpipe.log "step     1/100000" 60; then  # from here on the streams run
  t0=$(now)
  kill -USR1 "$(pid_of_rank xpipe 1)"
  wait $job
  rc=$?
  took=$(elapsed $t0)
  step=$(sed -nE 's/.*stopping after step ([0-9]+) of 100000 .*/\1/p' xpipe.log)
  if [ $rc -eq 0 ] && [ -n "$step" ] && within $took 10 && [ "$(cat $out/xpipe/checkpoints/LATEST)" = "$(printf 'ckpt_%08d.h5' $step)" ]; then
    ok "XPipe: SIGUSR1 to rank 1 mid-stream: checkpoint at step $step and exit 0 in $(printf %.2f $took) s"
    run xpipe "${xpipe[@]}" --set run.steps=$((step + 3)) --restart latest >xpipe2.log 2>&1 &&
      grep -q "step $(printf '%5d' $((step + 3)))/" xpipe2.log && ok "XPipe: the next job continues from step $step" ||
      { fail "XPipe: no continuation"; tail -3 xpipe2.log; }
  else
    fail "XPipe stop: exit $rc after $took s, step '$step'"; tail -5 xpipe.log
  fi
else
  fail "XPipe run never started"; cat xpipe.log; kill -9 $job
fi

# --- LATEST lost, or naming a file that is gone: the newest checkpoint that checks out
for case in lost dangling; do
  cp -r $out/full $out/$case
  rm $out/$case/checkpoints/ckpt_00000012.h5
  if [ $case = lost ]; then rm $out/$case/checkpoints/LATEST; want="there is no LATEST file"; else want="LATEST names 'ckpt_00000012.h5', which does not exist"; fi
  if run $case --restart latest >$case.log 2>&1 && grep -q "$want: restarting from the newest checkpoint that checks out, ckpt_00000008.h5" $case.log &&
     same_losses $case; then
    ok "LATEST $case: restarted from ckpt_00000008.h5, as the log says, on the same trajectory"
  else
    fail "LATEST $case"; grep strata: $case.log | head -5
  fi
done

# --- a checkpoint of another model, another seed
fault mismatch 2 "was written with model.n_head = 4, the deck has 8" 20 --restart $out/full/checkpoints/ckpt_00000008.h5 --set model.n_head=8
fault seed 2 "was written with run.seed = 3, the deck has 4" 20 --restart $out/full/checkpoints/ckpt_00000008.h5 --set run.seed=4
run changed --restart $out/full/checkpoints/ckpt_00000008.h5 --set optim.lr=1e-4 >changed.log 2>&1 &&
  grep -q "changed since the checkpoint: optim.lr 0.00029999999999999997 -> 0.0001, run.name \"full\" -> \"changed\"" changed.log &&
  ok "the restart log lists what changed" || { fail "changes not listed"; grep restart changed.log; }

# --- two runs on one directory; a fresh start over checkpoints
run busy --set run.steps=100000 --set run.checkpoint_every=0 >busy.log 2>&1 &
job=$!
if wait_for busy.log "step     2/" 60; then
  fault busy 2 "run directory '$out/busy' is in use by another job (host " 10 --restart latest
  kill -TERM "$(pid_of_rank busy 0)"
  wait $job
else
  fail "busy: the first run never started"; kill -9 $job
fi
fault full 2 "run directory '$out/full' already has checkpoints (newest ckpt_00000012.h5): resume with --restart latest" 20
mkdir -p $out/metrics-dir/metrics.csv
fault metrics-dir 2 "cannot write metrics file '$out/metrics-dir/metrics.csv': Is a directory" 20
cp -r $out/full $out/over
if run over --fresh >over.log 2>&1 && grep -q "the previous checkpoints are kept in $out/over/checkpoints.replaced-" over.log &&
   ls -d $out/over/checkpoints.replaced-*/ckpt_00000012.h5 >/dev/null && same_losses over; then
  ok "--fresh starts over and keeps the old checkpoints aside"
else
  fail "--fresh"; tail -3 over.log
fi

# --- strata tokenize: a shard that cannot be written on rank 1 (disk full) ends both ranks
# with exit 4 and one line; data.token_dir is not created (the shards stay in
# token_dir.partial), and the next tokenize, healthy, starts over and finishes
cat > spm.toml <<'DECK'
[model]
vocab_size = 400
[data]
kind = "tokens"
files = ["/usr/share/games/fortunes/computers", "/usr/share/games/fortunes/science"]
token_dir = "spm-tokens"
shard_mb = 0.05
DECK
t0=$(now)
timeout 60 "$mpiexec" -n 2 env LD_PRELOAD=$shim STRATA_FAULT_OP=write STRATA_FAULT_ERRNO=ENOSPC STRATA_FAULT_RANK=1 \
  STRATA_FAULT_PATH=.tok.tmp "$strata" tokenize spm.toml >tokenize.out 2>tokenize.err
rc=$?
if [ $rc -eq 4 ] && [ "$(wc -l <tokenize.err)" -eq 1 ] &&
   grep -q "strata: error: spm-tokens.partial/shard_00000[1-9].tok: cannot write: No space left on device" tokenize.err &&
   [ ! -e spm-tokens ]; then
  ok "tokenize: a shard not written on rank 1: exit 4 in $(printf %.1f $(elapsed $t0)) s, $(cat tokenize.err), no spm-tokens"
else
  fail "tokenize with a failing write: exit $rc"; cat tokenize.err
fi
if timeout 60 "$mpiexec" -n 2 "$strata" tokenize spm.toml >tokenize2.out 2>&1 && [ -f spm-tokens/tokenizer.model ] &&
   [ ! -e spm-tokens.partial ]; then
  ok "tokenize after the failure: done, $(ls spm-tokens | wc -l) files"
else
  fail "tokenize after the failure"; cat tokenize2.out
fi
# --- strata export: a write or fsync that fails (disk full, I/O error) exits 4 with one
# line, and leaves nothing at the output nor a temporary beside it; then a healthy export
ck=$out/zero-write/checkpoints/ckpt_00000004.h5
export_fault() {  # NAME FORMAT OP ERRNO PATH MESSAGE
  timeout 60 env LD_PRELOAD=$shim STRATA_FAULT_OP=$3 STRATA_FAULT_ERRNO=$4 STRATA_FAULT_PATH=$5 \
    "$strata" export $ck $1 --format $2 >$1.out 2>$1.err
  local rc=$?
  if [ $rc -eq 4 ] && [ "$(wc -l <$1.err)" -eq 1 ] && grep -q "$6" $1.err && [ ! -e $1 ] &&
     [ -z "$(ls -d $1.partial-* 2>/dev/null)" ]; then
    ok "export $2 with a failing $3: exit 4, $(cat $1.err), nothing left"
  else
    fail "export $2 with a failing $3: exit $rc"; cat $1.err; ls -d $1* 2>/dev/null
  fi
}
export_fault export-hf hf write ENOSPC model.safetensors "model.safetensors: cannot write: No space left on device"
export_fault export-llmc llmc fsync EIO export-llmc.partial "export-llmc.partial-[0-9]*: cannot flush: Input/output error"
timeout 60 "$strata" export $ck export-hf --format hf >/dev/null 2>&1 && [ -f export-hf/model.safetensors ] &&
  ok "a healthy export after the failures" || fail "export after the failures"
finish
