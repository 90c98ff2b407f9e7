#!/usr/bin/env bash
# The suite's last test (CTest fixture cleanup of "suite"): no process started by a test
# outlives the tests. Every test runs with STRATA_TEST_SUITE=<build dir> in its
# environment, which its children inherit (ranks, launchers, the Slurm test's munged,
# slurmctld and slurmd); a process that still carries it once every test has ended is a
# leak. The check gives a process that is on its way out 20 s to go (polling /proc, no
# fixed sleep), then names each survivor (pid, command line), kills it, and fails.
# Usage: check_no_leaks.sh MARKER   (the value of STRATA_TEST_SUITE)
set -u
marker="STRATA_TEST_SUITE=$1"
survivors() {
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    { tr '\0' '\n' < /proc/$p/environ; } 2>/dev/null | grep -qxF -- "$marker" && echo $p
  done
}
left=$(survivors)
for _ in $(seq 1 200); do
  [ -z "$left" ] && break
  sleep 0.1
  left=$(survivors)
done
if [ -z "$left" ]; then
  echo "ok: no process started by the suite survives it"
  exit 0
fi
for p in $left; do
  echo "FAIL: left running by the suite: pid $p: $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-200)"
done
kill -9 $left 2>/dev/null
exit 1
