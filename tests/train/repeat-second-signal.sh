#!/usr/bin/env bash
# Outside CTest: the faults test's second-signal case N times, each job's exit code and
# the ranks' statuses as MPICH's mpiexec records them (-print-all-exitcodes). A 2-rank job
# whose rank 1 hangs before step 6 (--inject-fault hang:6:1) gets SIGTERM twice, 2.5 s apart, on
# both ranks; every run must end 143, within 4 s of the second, with the rank's line. Run it with the machine
# busy (a build beside it).
# Usage: tests/train/repeat-second-signal.sh BUILD_DIR [N]    (docs/tests.md)
set -u
build=$(realpath "$1")
n=${2:-20}
strata=$build/bin/strata
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../support/test_lib.sh"
cd "$work"
cp "$here/../support/ckpt-deck.toml" deck.toml
export LD_PRELOAD=$build/tests/mpi_yield_shim.so OPENBLAS_NUM_THREADS=1
marker="strata-repeat-signal-$$"
on_exit "pkill -9 -f '$marker' 2>/dev/null"
pid_of_rank() {  # NAME RANK
  for p in $(pgrep -x strata); do
    { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -qx "PMI_RANK=$2" &&
      { tr '\0' ' ' </proc/$p/cmdline; } 2>/dev/null | grep -q -- "run.out_dir=runs-$marker --set run.name=$1 " && echo $p
  done | head -1
}
wait_for() { for _ in $(seq 1 $(($3 * 10))); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
for i in $(seq 1 "$n"); do
  name=second$i
  timeout 120 mpiexec -print-all-exitcodes -n 2 "$strata" train deck.toml \
    --set run.out_dir=runs-$marker --set run.name=$name --set run.stop_timeout=600 --inject-fault hang:6:1 >$name.out 2>$name.err &
  job=$!
  wait_for $name.err "rank 1 hangs before step 6" 60 || { fail "run $i never hung"; kill -9 $job; continue; }
  kill -TERM "$(pid_of_rank $name 0)" "$(pid_of_rank $name 1)"
  sleep 2.5  # the gap at which strata counts a second request
  t0=$(date +%s.%N)
  kill -TERM "$(pid_of_rank $name 0)" "$(pid_of_rank $name 1)"
  wait $job
  rc=$?
  took=$(echo "$(date +%s.%N) - $t0" | bc)
  codes=$(grep -o 'Exit codes: .*' $name.out)
  # test_faults.sh's bound: the job ends within 4 s of the second signal
  [ $rc -eq 143 ] && [ "$(echo "$took <= 4" | bc)" = 1 ] &&
    grep -q "second SIGTERM: exiting at once, without a checkpoint" $name.err && ok "run $i: exit 143 in $took s ($codes)" ||
    { fail "run $i: exit $rc after $took s ($codes)"; cat $name.err; }
done
finish
