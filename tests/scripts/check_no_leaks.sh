#!/usr/bin/env bash
# The suite's last test (CTest fixture cleanup of "suite"): no process started by a test
# outlives the tests. Every test runs with STRATA_TEST_SUITE=<build dir> in its
# environment, which its children inherit (ranks, launchers, the Slurm test's munged,
# slurmctld and slurmd); a process that still carries it once every test has ended is a
# leak. The check gives a process that is on its way out 20 s to go (polling /proc, no
# fixed sleep), then names each survivor (pid, command line), kills it, and fails. Run as
# root, it also fails on (and removes) any network namespace, bridge or namespace mount
# that scripts/slurm-local.sh made for a cluster of several nodes and a test left.
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
status=0
if [ -z "$left" ]; then
  echo "ok: no process started by the suite survives it"
else
  for p in $left; do
    echo "FAIL: left running by the suite: pid $p: $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-200)"
  done
  kill -9 $left 2>/dev/null
  status=1
fi
# What scripts/slurm-local.sh makes for a cluster of several nodes and removes at `down`: a
# test killed before its clean-up (SIGKILL) leaves it. Names: sl<port>-n<k> (network
# namespaces), sl<port>-br (bridges), sl<port>-v<k> (the nodes' veth pairs), nsfs mounts on .../ns/uts-node<k> and ipc-node<k>.
if [ "$(id -u)" -eq 0 ]; then
  spaces=$(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E '^sl[0-9]+-n[0-9]+$')
  bridges=$(ip -br link show type bridge 2>/dev/null | awk '{ print $1 }' | grep -E '^sl[0-9]+-br$')
  veths=$(ip -br link show type veth 2>/dev/null | awk '{ sub(/@.*/, "", $1); print $1 }' | grep -E '^sl[0-9]+-v[0-9]+$')
  mounts=$(awk '$3 == "nsfs" && $2 ~ /\/ns\/(uts|ipc)-node[0-9]+$/ { print $2 }' /proc/mounts)
  if [ -n "$spaces$bridges$veths$mounts" ]; then
    echo "FAIL: left by the suite's Slurm clusters: $(echo $spaces $bridges $veths $mounts)"
    for n in $spaces; do ip netns pids "$n" | xargs -r kill -9; ip netns del "$n"; done
    for b in $bridges $veths; do ip link del "$b" ; done
    for m in $mounts; do umount "$m"; done
    status=1
  else
    echo "ok: no namespace, bridge, veth or namespace mount of a test cluster is left"
  fi
fi
exit $status
