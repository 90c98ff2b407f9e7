#!/usr/bin/env bash
# The PBS templates (jobscripts/pbs/) without a PBS server (there is none here): both pass
# bash -n, and train.pbs runs as a plain script with the variables PBS would set
# (PBS_NODEFILE with one line per rank, as select=1:ncpus=2:mpiprocs=2 makes it,
# PBS_O_WORKDIR, PBS_JOBID) and WALLTIME in place of qstat: the first run takes its rank
# count from the node file and stops before the walltime with a checkpoint (exit 0), the
# second resumes from it with --restart latest; a missing node file is a clear error.
# Usage: test_pbs_template.sh REPO_DIR STRATA MPIEXEC
set -u
repo=$(realpath "$1")
strata=$(realpath "$2")
mpiexec=$3
source "$(dirname "$0")/../support/test_lib.sh"

for f in "$repo"/jobscripts/pbs/train.pbs "$repo"/jobscripts/pbs/chain.sh; do
  bash -n "$f" && ok "bash -n $(basename "$f")" || fail "bash -n $f"
done

cd "$work"
cp "$repo/tests/jobscripts/tiny-gpt.toml" deck.toml
printf '%s\n' "$(hostname)" "$(hostname)" > nodefile  # select=1:ncpus=2:mpiprocs=2
job() {  # the template's body as PBS would start it
  env PBS_NODEFILE="$work/nodefile" PBS_O_WORKDIR="$work" PBS_JOBID="$1.test" DECK=deck.toml STRATA="$strata" \
    MPIEXEC="$mpiexec" WALLTIME=10 MARGIN=2 timeout 120 bash "$repo/jobscripts/pbs/train.pbs" \
    --set run.name=pbs --set run.steps=100000 --set run.checkpoint_every=0 >"$1.out" 2>&1
}

job 1
rc=$?
k=$(sed -nE 's/.*stopping after step ([0-9]+) of 100000 \(run.max_walltime\).*/\1/p' 1.out)
if [ $rc -eq 0 ] && grep -q ": 2 ranks:" 1.out && grep -q "strata: 2 ranks" 1.out && [ -n "$k" ] &&
   grep -q "run.max_walltime=8" 1.out && grep -q "^strata: node $(hostname) (ranks 0-1)$" 1.out; then
  ok "train.pbs: 2 ranks from the node file, both on this node ($(hostname)), stopped before the walltime at step $k with a checkpoint, exit 0"
else
  fail "first PBS job: exit $rc, k '$k'"; cat 1.out
fi

job 2
rc=$?
if [ $rc -eq 0 ] && grep -q "restart: read runs/pbs/checkpoints/$(printf 'ckpt_%08d.h5' "$k") (step $k" 2.out &&
   grep -q "step $(printf '%5d' $((k + 1)))/100000" 2.out; then
  ok "the next PBS job resumes from step $k with --restart latest"
else
  fail "second PBS job: exit $rc"; cat 2.out
fi

RESTART= PBS_NODEFILE="$work/nodefile" PBS_O_WORKDIR="$work" DECK=deck.toml STRATA="$strata" MPIEXEC="$mpiexec" \
  timeout 120 bash "$repo/jobscripts/pbs/train.pbs" --set run.name=pbs --set run.steps=2 >3.out 2>&1
rc=$?
if [ $rc -eq 0 ] && ! grep -q -- "--restart" 3.out && grep -q "step     1/2" 3.out; then
  ok "RESTART= starts fresh even where checkpoints exist"
else
  fail "RESTART=: exit $rc"; cat 3.out
fi

out=$(env -u PBS_NODEFILE PBS_O_WORKDIR="$work" bash "$repo/jobscripts/pbs/train.pbs" 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "no readable \$PBS_NODEFILE" <<<"$out" && ok "outside a PBS job: one clear line, exit 1" ||
  fail "without PBS_NODEFILE: exit $rc: $out"

finish
