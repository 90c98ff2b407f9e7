#!/usr/bin/env bash
# The Slurm job templates (jobscripts/slurm/) against a real one-node Slurm cluster that
# scripts/slurm-local.sh brings up for this test and always tears down:
#  (a) train.sbatch on 2 tasks with sbatch --wait: exit 0, metrics and a checkpoint;
#  (b) scancel --signal=USR1 --batch mid-run: the trap forwards the signal, strata writes
#      a checkpoint and the job ends COMPLETED with exit code 0;
#  (c) chain.sh with two jobs: the second starts after the first (afterok), resumes from
#      its checkpoint with --restart latest and continues its step counter;
#  (d) train.sbatch on 1 task of 2 CPUs: one rank of 2 threads (--threads from
#      --cpus-per-task), OpenMP's binding set, trained to its checkpoint.
# Needs root (the daemons run as root); exits 77 (skipped) otherwise.
# Usage: test_slurm_jobs.sh REPO_DIR STRATA
set -u
repo=$(realpath "$1")
strata=$(realpath "$2")
[ "$(id -u)" -eq 0 ] || { echo "SKIP: starting the Slurm daemons needs root"; exit 77; }
source "$(dirname "$0")/../support/test_lib.sh"  # $work is searchable: munged wants that of its socket's dirs
export SLURM_LOCAL_DIR=$work/slurm SLURM_LOCAL_TIMEOUT=60
export SLURM_LOCAL_PORT=$((20000 + $$ % 20000))  # not the default port: a site's or another test's cluster
on_exit '"$repo/scripts/slurm-local.sh" down >/dev/null 2>&1'

if ! "$repo/scripts/slurm-local.sh" up >"$work/up.log" 2>&1; then
  echo "FAIL: the local Slurm cluster did not come up:"; tail -20 "$work/up.log"; exit 1
fi
eval "$("$repo/scripts/slurm-local.sh" env)"
cd "$work"

cp "$repo/tests/jobscripts/tiny-gpt.toml" deck.toml
export DECK=$work/deck.toml STRATA=$strata
template=$repo/jobscripts/slurm/train.sbatch

source "$repo/tests/jobscripts/slurm_lib.sh"  # job_end

# (a) a training job on 2 tasks
if timeout 180 sbatch --wait --output=a-%j.out "$template" --set run.name=a >sbatch-a.log 2>&1; then
  if [ -s runs/a/metrics.csv ] && [ -f runs/a/checkpoints/ckpt_00000008.h5 ] && grep -q "2 ranks" a-*.out; then
    ok "sbatch --wait train.sbatch on 2 tasks: exit 0, metrics.csv and the step-8 checkpoint"
  else
    fail "job (a) left no metrics or checkpoint"; cat a-*.out
  fi
else
  fail "job (a): sbatch --wait failed"; cat sbatch-a.log a-*.out 2>/dev/null
fi

# (b) USR1 to the batch shell mid-run: checkpoint, COMPLETED, exit 0
id=$(sbatch --parsable --output=b-%j.out "$template" --set run.name=b --set run.steps=100000 --set run.checkpoint_every=0)
id=${id%%;*}
for _ in $(seq 1 300); do grep -q "step     3/" b-"$id".out 2>/dev/null && break; sleep 0.2; done
scancel --signal=USR1 --batch "$id"
end=$(job_end "$id")
step=$(sed -nE 's/.*stopping after step ([0-9]+) of 100000.*/\1/p' b-"$id".out)
if [ "$end" = "COMPLETED 0:0" ] && [ -n "$step" ] && grep -q "got SIGUSR1" b-"$id".out &&
   [ "$(cat runs/b/checkpoints/LATEST 2>/dev/null)" = "$(printf 'ckpt_%08d.h5' "$step")" ]; then
  ok "scancel --signal=USR1 --batch: forwarded, checkpoint at step $step, job COMPLETED with exit code 0"
else
  fail "signal job: '$end', step '$step'"; cat b-"$id".out
fi

# (c) a chain of two jobs; each stops after ~3 s (run.max_walltime = 8 s, less strata's 5 s margin) with a checkpoint
mapfile -t ids < <(JOBS=2 SBATCH_ARGS="--output=c-%j.out" "$repo/jobscripts/slurm/chain.sh" \
  --set run.name=c --set run.steps=100000 --set run.checkpoint_every=0 --set run.max_walltime=8)
if [ "${#ids[@]}" -eq 2 ]; then
  first=$(job_end "${ids[0]}")
  second=$(job_end "${ids[1]}")
  k=$(sed -nE 's/.*stopping after step ([0-9]+) of 100000.*/\1/p' c-"${ids[0]}".out)
  if [ "$first" = "COMPLETED 0:0" ] && [ "$second" = "COMPLETED 0:0" ] && [ -n "$k" ] &&
     grep -q "restart: read runs/c/checkpoints/$(printf 'ckpt_%08d.h5' "$k") (step $k" c-"${ids[1]}".out &&
     grep -q "step $(printf '%5d' $((k + 1)))/100000" c-"${ids[1]}".out &&
     ! grep -q "step     1/100000" c-"${ids[1]}".out; then
    ok "chain of 2 (afterok): job 2 resumed from job 1's step-$k checkpoint and went on from step $((k + 1))"
  else
    fail "chain: '$first' / '$second', k '$k'"; cat c-*.out
  fi
else
  fail "chain.sh did not print two job ids: ${ids[*]}"
fi

# (d) one wide rank: 1 task with 2 CPUs runs 2 threads (--cpus-per-task -> --threads, the
# OpenMP binding set), and trains
if timeout 180 sbatch --wait --ntasks-per-node=1 --cpus-per-task=2 --output=d-%j.out "$template" \
     --set run.name=d --set parallel.data=1 --set run.steps=4 >sbatch-d.log 2>&1; then
  if [ -f runs/d/checkpoints/ckpt_00000004.h5 ] &&
     grep -q "strata: 2 threads per rank (--threads); rank 0 on CPUs .*, OMP_PROC_BIND=close OMP_PLACES=cores" d-*.out; then
    ok "sbatch --cpus-per-task=2 on 1 task: one rank of 2 threads, bound close to cores, trained to its checkpoint"
  else
    fail "job (d) did not run 2 threads or left no checkpoint"; cat d-*.out
  fi
else
  fail "job (d): sbatch --wait failed"; cat sbatch-d.log d-*.out 2>/dev/null
fi

finish
