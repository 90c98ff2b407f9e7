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
survivors() {  # one grep over every process's environment (NUL-separated entries)
  grep -lsxzF -- "$marker" /proc/[0-9]*/environ 2>/dev/null | sed -E 's|/proc/([0-9]+)/environ|\1|' | grep -vx "$$"
}
left=$(survivors)
deadline=$(( $(date +%s) + 20 ))
while [ -n "$left" ] && [ "$(date +%s)" -lt $deadline ]; do
  sleep 0.2
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
