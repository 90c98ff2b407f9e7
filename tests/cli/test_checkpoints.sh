#!/usr/bin/env bash
# Checkpoints as an HPC job sees them, through the real executable:
#  - a job killed (SIGKILL) inside a checkpoint write leaves the previous checkpoint intact
#    and LATEST pointing at it; --restart latest resumes and reproduces the uninterrupted
#    run's losses exactly;
#  - layer-parallel MGRIT (warm-started, inexact solves) restarted from a checkpoint
#    repeats the uninterrupted run's losses and test accuracy exactly;
#  - the GPT under MGRIT: SIGTERM to one rank stops at a step boundary with a checkpoint,
#    and the restart continues exactly;
#  - SIGUSR1 to one rank: all ranks stop at the same step, write a checkpoint, exit 0;
#  - run.max_walltime stops early with a checkpoint;
#  - corrupt, truncated and mismatched checkpoints: one line naming file and tensor,
#    exit 2, nothing overwritten;
#  - inspect and generate.
# Usage: test_checkpoints.sh STRATA MPIEXEC
set -u
here=$(cd "$(dirname "$0")" && pwd)
strata=$1
mpiexec=$2
source "$here/../support/test_lib.sh"
cd "$work"
marker="strata-ckpt-test-$$"  # in every job's command line, so only this test's processes are touched
on_exit "pkill -9 -f '$marker' 2>/dev/null"
# the newest strata rank of this test whose command line holds $1
rank_pid() {
  for p in $(pgrep -x strata); do tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -q -- "$1" && echo $p; done | tail -1
}
wait_for() {  # file pattern seconds
  for _ in $(seq 1 $(($3 * 5))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done
  return 1
}

cp "$here/../support/ckpt-deck.toml" deck.toml
run() { timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml --set run.out_dir=runs-$marker "$@"; }

# --- the reference: uninterrupted
run --set run.name=full >full.log 2>&1 || { fail "uninterrupted run"; cat full.log; }

# --- killed inside the write of the step-8 checkpoint
run --set run.name=crash --inject-fault pause-checkpoint:8 >crash.log 2>&1 &
job=$!
if wait_for crash.log "pausing inside the checkpoint write" 60; then
  pkill -9 -f "runs-$marker --set run.name=crash"; wait $job 2>/dev/null
  d=runs-$marker/crash/checkpoints
  if [ "$(cat $d/LATEST)" = "ckpt_00000004.h5" ] && [ -f $d/ckpt_00000008.h5.tmp ] && [ ! -f $d/ckpt_00000008.h5 ]; then
    ok "SIGKILL inside a checkpoint write leaves LATEST at the previous checkpoint"
  else
    fail "after SIGKILL: LATEST=$(cat $d/LATEST 2>/dev/null), files: $(ls $d)"
  fi
  if timeout 60 "$strata" inspect $d/ckpt_00000004.h5 >inspect.log 2>&1 && grep -q "all checksums ok" inspect.log; then
    ok "the previous checkpoint is intact (inspect verifies every checksum)"
  else
    fail "inspect of the previous checkpoint"; cat inspect.log
  fi
  run --set run.name=crash --restart latest >resume.log 2>&1 || { fail "restart after the crash"; cat resume.log; }
  grep -q "restart: read runs-$marker/crash/checkpoints/ckpt_00000004.h5 (step 4" resume.log || fail "restart did not use the step-4 checkpoint"
  if same_rows runs-$marker/full/metrics.csv runs-$marker/crash/metrics.csv; then
    ok "restart from the surviving checkpoint reproduces every loss of the uninterrupted run"
  else
    fail "losses after restart differ:"; diff <(cut -d, -f1,2 runs-$marker/full/metrics.csv) <(cut -d, -f1,2 runs-$marker/crash/metrics.csv)
  fi
else
  fail "the injected pause never came"; cat crash.log; kill -9 $job 2>/dev/null
fi

# --- layer-parallel MGRIT (inexact, warm-started solves): a restart repeats the run bit for bit
cp "$here/../support/resnet-ckpt-deck.toml" resnet.toml
rrun() { timeout 120 "$mpiexec" -n 2 "$strata" train resnet.toml --set run.out_dir=runs-$marker "$@"; }
if rrun --set run.name=mgrit-full >mgrit-full.log 2>&1 &&
   rrun --set run.name=mgrit-resumed --restart runs-$marker/mgrit-full/checkpoints/ckpt_00000003.h5 >mgrit-resumed.log 2>&1; then
  if same_rows runs-$marker/mgrit-full/metrics.csv runs-$marker/mgrit-resumed/metrics.csv 1,2,5 5 2; then
    ok "MGRIT: a restart from the step-3 checkpoint repeats steps 4-6 (losses, test accuracy) exactly"
  else
    fail "MGRIT restart differs:"; diff <(cut -d, -f1,2,5 runs-$marker/mgrit-full/metrics.csv) <(cut -d, -f1,2,5 runs-$marker/mgrit-resumed/metrics.csv)
  fi
else
  fail "the MGRIT runs"; tail -3 mgrit-full.log mgrit-resumed.log
fi

# --- the GPT under MGRIT (two levels, inexact): SIGTERM to one rank stops every rank at a
# step boundary with a checkpoint; the restart continues exactly as a run that wrote its
# checkpoint at that step
loss_at() { awk -F, -v s="$2" '$1 == s { v = $2 } END { print v }' "$1"; }
grun() {
  timeout 120 "$mpiexec" -n 2 "$strata" train deck.toml --set run.out_dir=runs-$marker "$@" --set parallel.data=1 \
    --set parallel.pipeline=2 --set parallel.schedule=mgrit --set model.n_layer=6 --set layerpar.levels=2 \
    --set layerpar.cfactor=2 --set layerpar.buffer_open=1 --set layerpar.buffer_close=1 \
    --set optim.lr=1e-3 --set optim.min_lr=1e-3 --set optim.warmup_steps=0  # the same rates whatever run.steps
}
grun --set run.name=gpt-term --set run.steps=100000 --set run.checkpoint_every=0 >gpt-term.log 2>&1 &
job=$!
if wait_for gpt-term.log "step     3/" 60; then
  kill -TERM "$(rank_pid "runs-$marker --set run.name=gpt-term")"
  wait $job
  rc=$?
  step=$(sed -nE 's/.*stopping after step ([0-9]+) of 100000 .*/\1/p' gpt-term.log)
  if [ $rc -eq 0 ] && [ -n "$step" ] && [ "$(cat runs-$marker/gpt-term/checkpoints/LATEST)" = "$(printf 'ckpt_%08d.h5' "$step")" ]; then
    # (both with checkpoints every `step` steps: a checkpoint step drops MGRIT's warm starts,
    # so the two must have the same ones: the deck's every 4 would differ where 4 divides step + 1)
    grun --set run.name=gpt-term --set run.steps=$((step + 2)) --set run.checkpoint_every=$step --restart latest >gpt-term2.log 2>&1
    grun --set run.name=gpt-ref --set run.steps=$((step + 2)) --set run.checkpoint_every=$step >gpt-ref.log 2>&1
    a="$(loss_at runs-$marker/gpt-term/metrics.csv $((step + 1))) $(loss_at runs-$marker/gpt-term/metrics.csv $((step + 2)))"
    b="$(loss_at runs-$marker/gpt-ref/metrics.csv $((step + 1))) $(loss_at runs-$marker/gpt-ref/metrics.csv $((step + 2)))"
    if [ "$a" = "$b" ] && [ "$a" != " " ]; then
      ok "GPT under MGRIT: SIGTERM stopped at step $step with a checkpoint; the restart's next losses ($a) are the uninterrupted run's"
    else
      fail "GPT MGRIT restart after SIGTERM: '$a' against '$b'"; tail -3 gpt-term2.log gpt-ref.log
    fi
  else
    fail "GPT MGRIT SIGTERM: exit $rc, step '$step'"; cat gpt-term.log
  fi
else
  fail "the GPT MGRIT run never started"; cat gpt-term.log; kill -9 $job
fi

# --- compressed gradient sums across two nodes (STRATA_RANKS_PER_NODE=1: a node per rank),
# int8 codes and PowerSGD factors: the codec's state (error feedback; PowerSGD's Q too) is
# in the checkpoint, and a restart on the same layout repeats the run bit for bit; onto
# another layout (both ranks on one node) it starts from zero, said once
codec_run() {  # CODEC RANKS_PER_NODE strata args...
  timeout 120 "$mpiexec" -n 2 env STRATA_RANKS_PER_NODE=$2 "$strata" train deck.toml --set run.out_dir=runs-$marker \
    --set parallel.grad_sum=nodes --set parallel.grad_compression=$1 --set run.steps=8 --set run.checkpoint_every=4 "${@:3}"
}
for codec in int8 powersgd; do
  c4=runs-$marker/$codec-full/checkpoints/ckpt_00000004.h5
  place="$codec error feedback of data=2 sum=nodes:$codec$([ $codec = powersgd ] && echo 4) on 2 ranks"
  if codec_run $codec 1 --set run.name=$codec-full >$codec-full.log 2>&1 &&
     codec_run $codec 1 --set run.name=$codec-again --restart $c4 >$codec-again.log 2>&1 &&
     grep -q "restart: the $codec error feedback continues from the checkpoint" $codec-again.log &&
     same_rows runs-$marker/$codec-full/metrics.csv runs-$marker/$codec-again/metrics.csv 1,2 6 2; then
    ok "$codec: a restart from step 4 with the codec's state repeats steps 5-8 bit for bit"
  else
    fail "$codec restart:"; tail -3 $codec-full.log $codec-again.log
    diff <(cut -d, -f1,2 runs-$marker/$codec-full/metrics.csv) <(cut -d, -f1,2 runs-$marker/$codec-again/metrics.csv)
  fi
  timeout 60 "$strata" inspect $c4 >$codec-inspect.log 2>&1 &&
    grep -q "^  /comm/grad_compression  \[2, [0-9]*\]  ok" $codec-inspect.log &&
    grep -q "^compression  $place, 1 replica a node" $codec-inspect.log &&
    ok "$codec: inspect shows the codec's state [ranks, values], its checksums verified, and where it is valid" ||
    { fail "inspect of a $codec checkpoint"; cat $codec-inspect.log; }
  if codec_run $codec 2 --set run.name=$codec-moved --restart $c4 >$codec-moved.log 2>&1 &&
     grep -q "restart: the $codec error feedback starts from zero (the checkpoint's is of $place, 1 replica a node; this run is $place, 2 replicas a node)" $codec-moved.log; then
    ok "$codec onto another layout: the error feedback starts from zero, said in one line"
  else
    fail "$codec restart onto two ranks a node"; tail -3 $codec-moved.log
  fi
done

# --- SIGUSR1 to one rank only: a collective stop with a checkpoint, exit 0
run --set run.name=signal --set run.steps=100000 --set run.checkpoint_every=0 >signal.log 2>&1 &
job=$!
if wait_for signal.log "step     2/" 60; then
  kill -USR1 "$(rank_pid "runs-$marker --set run.name=signal")"
  wait $job
  rc=$?
  step=$(sed -nE 's/.*stopping after step ([0-9]+) of 100000 .*/\1/p' signal.log)
  if [ $rc -eq 0 ] && [ -n "$step" ] && [ "$(cat runs-$marker/signal/checkpoints/LATEST)" = "$(printf 'ckpt_%08d.h5' "$step")" ]; then
    ok "SIGUSR1 to one rank: checkpoint at step $step, exit 0"
    run --set run.name=signal --set run.steps=$((step + 2)) --restart latest >signal2.log 2>&1
    grep -q "step $(printf '%5d' $((step + 2)))/$((step + 2))" signal2.log && ok "the next job continues from step $step" || { fail "no continuation"; cat signal2.log; }
  else
    fail "SIGUSR1: exit $rc, step '$step'"; cat signal.log
  fi
else
  fail "signal run never started"; cat signal.log; kill -9 $job
fi

# --- run.max_walltime
run --set run.name=walltime --set run.steps=100000 \
  --set run.checkpoint_every=0 --set run.max_walltime=7 >walltime.log 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "(run.max_walltime)" walltime.log && [ -f runs-$marker/walltime/checkpoints/LATEST ]; then
  ok "run.max_walltime stops in time with a checkpoint"
else
  fail "max_walltime: exit $rc"; tail -5 walltime.log
fi

# --- bad checkpoints: one line naming file and tensor, exit 2, nothing overwritten
good=runs-$marker/full/checkpoints/ckpt_00000012.h5
bad_expect() {  # file expected-text
  local before after out rc
  before=$(ls -l --time-style=full-iso runs-$marker/full/checkpoints | md5sum)
  out=$(run --set run.name=full --restart "$1" 2>&1 >/dev/null)
  rc=$?
  after=$(ls -l --time-style=full-iso runs-$marker/full/checkpoints | md5sum)
  if [ $rc -eq 2 ] && [ "$(grep -c 'strata: error' <<<"$out")" -eq 1 ] && grep -qF -- "$2" <<<"$out" && [ "$before" = "$after" ]; then
    ok "$2"
  else
    fail "restart from $1: exit $rc, wanted '$2', got: $out"
  fi
}
cp $good corrupt.h5
/usr/bin/python3 - corrupt.h5 <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    off = f["/params/wte"].id.get_chunk_info(0).byte_offset
with open(sys.argv[1], "r+b") as g:
    g.seek(off + 100); b = g.read(4); g.seek(off + 100); g.write(bytes(x ^ 0xFF for x in b))
PY
bad_expect corrupt.h5 "tensor /params/wte cannot be read: checksum mismatch"
head -c 100000 $good > truncated.h5
bad_expect truncated.h5 "checkpoint 'truncated.h5' cannot be opened (truncated or corrupt?)"
run --set run.name=wide --set model.n_embd=64 --set run.steps=4 >/dev/null 2>&1
bad_expect runs-$marker/wide/checkpoints/ckpt_00000004.h5 "ckpt_00000004.h5': tensor /params/wte has shape [256, 64] but the deck's model needs [256, 32]"
bad_expect nothere.h5 "nothere.h5' is missing or not an HDF5 file"
if timeout 60 "$strata" inspect corrupt.h5 >inspect2.log 2>&1; then fail "inspect passed a corrupt file"; else
  grep -q "/params/wte  \[256, 32\]  CHECKSUM FAILED" inspect2.log && ok "inspect flags the corrupt tensor (exit 3)" || { fail "inspect output"; cat inspect2.log; }
fi

# --- generate: byte-level text, prompt first, reproducible for a seed
timeout 60 "$strata" generate $good --prompt "The " --tokens 20 --seed 5 >gen1.txt 2>&1
rc=$?
timeout 60 "$strata" generate $good --prompt "The " --tokens 20 --seed 5 >gen2.txt 2>&1
if [ $rc -eq 0 ] && [ "$(wc -c <gen1.txt)" -eq 25 ] && [ "$(head -c 4 gen1.txt)" = "The " ]; then
  ok "generate samples 20 bytes after the prompt"
else
  fail "generate: exit $rc, output: $(cat -v gen1.txt)"
fi
cmp -s gen1.txt gen2.txt && ok "generate is reproducible for a seed" || fail "generate differs between runs"

exit $((failures > 0))
