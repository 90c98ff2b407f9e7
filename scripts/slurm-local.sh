#!/usr/bin/env bash
# slurm-local.sh - throw-away Slurm cluster on this machine (munged + slurmctld + slurmd,
# all as root, no systemd, no cgroups) so the tests can run the job templates in
# jobscripts/slurm/ as real sbatch/srun jobs (tests/jobscripts/test_slurm_jobs.sh). Adapted from
# the team's shared helper; the project carries its own copy.
#
# One node by default. With SLURM_LOCAL_NODES=N (2 or more) it is N "nodes" on this one
# machine: each node a Linux network namespace with its own address on a private bridge
# (10.77.X.0/24, X from the port; the controller at .1, node k at .10+k) and its own UTS
# namespace (hostname nodeK), one slurmd in each, munged and slurmctld shared in the
# machine's own namespace. Tasks of different nodes then reach each other only over TCP on
# the virtual ethernet, as on a cluster (tests/jobscripts/test_slurm_two_nodes.sh). That
# needs root, iproute2 (`ip netns`), mount (umount) and util-linux (nsenter, unshare).
#
#   slurm-local.sh install install (apt) what is missing: slurm-wlm, munge (iproute2, mount for N nodes)
#   slurm-local.sh up      install (apt) if missing, write config, start daemons, wait for nodes
#   slurm-local.sh down    cancel jobs, stop the daemons this script started (by pid file only),
#                          remove the namespaces, veths and the bridge
#   slurm-local.sh status  show daemons / sinfo / squeue (exit 3 if not fully up)
#   slurm-local.sh env     print "export SLURM_CONF=..." (use: eval "$(slurm-local.sh env)")
#   slurm-local.sh crash NODE   (N nodes) a node failure: SIGKILL to everything in NODE's
#                          namespace (its slurmd, job steps and tasks), its link cut
#   slurm-local.sh link MBIT    (N nodes) every node's link limited to MBIT Mbit/s each way
#                          (a token bucket, tc's tbf, on each node's eth0: what it sends),
#                          or "off": the veth's own speed again. A slow network between
#                          nodes, made real; tc's netem (a delay) is not in every kernel
#
# Env: SLURM_LOCAL_DIR (default /tmp/slurm-local)   config, munge key, state, logs, pid files
#      SLURM_LOCAL_TIMEOUT (default 60)             seconds to wait for the node / for jobs to end
#      SLURM_LOCAL_PORT (default 6817)              slurmctld port; slurmd uses PORT+1
#      SLURM_LOCAL_NODES (default 1)                nodes; 2 or more: in network namespaces
# Client commands (sbatch, squeue, ...) need SLURM_CONF=$SLURM_LOCAL_DIR/etc/slurm.conf. CI use:
#   sudo -E slurm-local.sh up && trap 'sudo -E slurm-local.sh down' EXIT
#   eval "$(slurm-local.sh env)"; sbatch --wait job.sh   # --wait: exit code = job's exit code
# Needs root (daemons run as root; jobs run as the submitting user).
set -euo pipefail
umask 022

D=$(realpath -m "${SLURM_LOCAL_DIR:-/tmp/slurm-local}")   # absolute; no spaces
T=${SLURM_LOCAL_TIMEOUT:-60}
PORT=${SLURM_LOCAL_PORT:-6817}
export SLURM_CONF=$D/etc/slurm.conf
SOCK=$D/munge/munge.socket
NODES=${SLURM_LOCAL_NODES:-1}
[[ $NODES =~ ^[1-9]$ ]] || { echo "slurm-local: SLURM_LOCAL_NODES must be 1 to 9, not '$NODES'" >&2; exit 2; }
NET=sl$PORT                                 # prefix of the namespaces, bridge and veths (<= 15 chars)
SUBNET=10.77.$((PORT % 250))                # the nodes' private /24
SLURMDS=(slurmd)                            # pid file names of the slurmds
if ((NODES > 1)); then SLURMDS=(); for ((k = 1; k <= NODES; k++)); do SLURMDS+=("slurmd-node$k"); done; fi
DAEMONS=(munged slurmctld "${SLURMDS[@]}")  # start order; stopped in reverse
export PATH=$PATH:/usr/sbin:/sbin           # daemons live in sbin

log() { echo "slurm-local: $*" >&2; }

# Print the pid of daemon $1 if its pid file points at a live (non-zombie) process
# whose command line names both the daemon and our directory - i.e. one we started.
# ($1 is the pid file's name: slurmd-node2 for node 2's slurmd.)
live_pid() {
  local f=$D/run/$1.pid pid cmd
  [[ -s $f ]] || return 1
  pid=$(cat "$f" 2>/dev/null); [[ $pid =~ ^[0-9]+$ ]] || return 1   # (a daemon may remove it as it exits)
  cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
  [[ $cmd == *"${1%%-*}"*"$D/"* ]] || return 1   # zombies have an empty cmdline
  echo "$pid"
}

install_pkgs() {
  local b pkgs=()
  for b in munged mungekey slurmctld slurmd sbatch; do command -v "$b" >/dev/null || pkgs=(slurm-wlm munge); done
  if ((NODES > 1)) && ! command -v ip >/dev/null; then pkgs+=(iproute2); fi  # ip netns (Debian's minimal root lacks it)
  if ((NODES > 1)) && ! command -v umount >/dev/null; then pkgs+=(mount); fi  # the namespaces' bind mounts (nor umount)
  ((${#pkgs[@]})) || return 0
  log "installing ${pkgs[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  local lock=(-o DPkg::Lock::Timeout=600)   # wait for concurrent apt/dpkg runs
  apt-get "${lock[@]}" update -q
  apt-get "${lock[@]}" install -y -q --no-install-recommends "${pkgs[@]}"
}

write_config() {
  mkdir -p "$D"/{etc,run,log,state,spool,munge}
  # munged refuses group/world-writable dirs on its key/socket/log/pid paths
  chmod 0755 "$D" "$D"/{etc,run,log,state,spool}; chmod 0711 "$D/munge"
  [[ -s $D/munge/munge.key ]] || mungekey --create --keyfile="$D/munge/munge.key"
  local node; node=$(slurmd -C | head -n1)  # NodeName=<host> CPUs=.. RealMemory=.. (real values)
  local host=${node%% *}; host=${host#NodeName=}
  # one node: this host at 127.0.0.1. N nodes: node1 .. nodeN at their namespaces'
  # addresses, each with the machine's CPUs and memory (they share them); the controller
  # on the bridge (slurmctld accepts only this host's own name as the controller's)
  local ctld="$host(127.0.0.1)" nodes="$node NodeAddr=127.0.0.1 State=UNKNOWN" spool=$D/spool slurmd=slurmd k
  local timeouts="SlurmdTimeout=10"
  if ((NODES > 1)); then
    ctld="$(hostname -s)($SUBNET.1)" nodes="" spool=$D/spool/%n slurmd=slurmd-%n
    # A ping to a dead node fails only after MessageTimeout (10 s by default), and the node is
    # set DOWN at the first ping round after SlurmdTimeout: a crashed node of two was found in
    # 28-31 s with 10/10, 19 s with 10/4 and 15 s with 5/5 (sleep jobs, link cut; docs/tests.md)
    timeouts="SlurmdTimeout=5"$'\n'"MessageTimeout=5"
    for ((k = 1; k <= NODES; k++)); do
      mkdir -p "$D/spool/node$k"
      nodes+="NodeName=node$k NodeAddr=$SUBNET.$((10 + k)) ${node#* } State=UNKNOWN"$'\n'
    done
  fi
  cat >"$SLURM_CONF.new" <<EOF
# generated by slurm-local.sh
ClusterName=local
SlurmctldHost=$ctld
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$D/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/$slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/$slurmd.log
PlugStackConfig=$D/etc/plugstack.conf
# no cgroups / systemd in containers: plain /proc process tracking, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# start jobs (and dependency successors) ~1 s after an event instead of 3 s
SchedulerParameters=batch_sched_delay=0
# Debian MPICH speaks PMI-1, which the pmi2 plugin serves: plain "srun ./mpi_app" just works
MpiDefault=pmi2
ReturnToService=2
# a node whose slurmd stops answering is set DOWN, and its jobs ended
$timeouts
# keep finished jobs visible to "scontrol show job" for an hour (there is no sacct)
MinJobAge=3600
KillWait=5
MailProg=/bin/true
# cancel jobs whose dependency can never be met (else they pend forever and CI hangs)
DependencyParameters=kill_invalid_depend
$nodes
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$SLURM_CONF.new" "$SLURM_CONF"
  : >"$D/etc/plugstack.conf"                 # isolate from /etc/slurm/plugstack.conf
}

# The nodes' network (N nodes): a bridge $NET-br at $SUBNET.1 in this namespace and, per
# node k, a network namespace $NET-nk joined to it by a veth pair (eth0 at $SUBNET.(10+k)
# inside) and a UTS namespace (hostname nodek) held by a bind mount on $D/ns/uts-nodek.
net_up() {
  command -v ip >/dev/null || { log "the nodes need iproute2 (ip netns): apt-get install iproute2"; return 1; }
  if ! ip link show "$NET-br" >/dev/null 2>&1; then
    if ip -4 addr show | grep -q "inet $SUBNET\."; then
      log "$SUBNET.0/24 is in use on this machine: pick another SLURM_LOCAL_PORT"; return 1
    fi
    { ip link add "$NET-br" type bridge && ip addr add "$SUBNET.1/24" dev "$NET-br" && ip link set "$NET-br" up; } || return 1
  fi
  mkdir -p "$D/ns"
  local k ns
  for ((k = 1; k <= NODES; k++)); do
    ns=$NET-n$k
    if ! ip netns list | grep -qw "$ns"; then  # (nsenter, not `ip -n`: that remounts /, which a chroot refuses)
      { ip netns add "$ns" && ip link add "$NET-v$k" type veth peer name eth0 netns "$ns" &&
        ip link set "$NET-v$k" master "$NET-br" up &&
        nsenter --net="/run/netns/$ns" ip addr add "$SUBNET.$((10 + k))/24" dev eth0 &&
        nsenter --net="/run/netns/$ns" ip link set eth0 up && nsenter --net="/run/netns/$ns" ip link set lo up; } || return 1
    fi
    if ! mountpoint -q "$D/ns/uts-node$k"; then
      : >"$D/ns/uts-node$k"
      : >"$D/ns/ipc-node$k"
      unshare --uts="$D/ns/uts-node$k" --ipc="$D/ns/ipc-node$k" hostname "node$k" || return 1
    fi
  done
}

net_down() {
  local k ns p f
  for ((k = 1; k <= NODES; k++)); do
    ns=$NET-n$k
    if ip netns list 2>/dev/null | grep -qw "$ns"; then
      p=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
      [[ -z ${p// /} ]] || { log "killing what is left in $ns: $p"; kill -9 $p 2>/dev/null || true; }
      ip netns del "$ns" || log "could not remove network namespace $ns"
    fi
    # the veth pair by name: a namespace lives on, unnamed, while sockets of it do (those of a
    # crashed node's peers retry for minutes), and with it its end of the pair
    if ip link show "$NET-v$k" >/dev/null 2>&1; then ip link del "$NET-v$k" || log "could not remove link $NET-v$k"; fi
    for f in "$D/ns/uts-node$k" "$D/ns/ipc-node$k"; do
      if mountpoint -q "$f" 2>/dev/null; then umount "$f" || log "could not unmount $f"; fi
    done
  done
  if ip link show "$NET-br" >/dev/null 2>&1; then ip link del "$NET-br" || log "could not remove bridge $NET-br"; fi
  return 0
}

# One slurmd per node; with N nodes each inside its node's namespaces.
start_slurmds() {
  if ((NODES == 1)); then live_pid slurmd >/dev/null || slurmd -f "$SLURM_CONF"; return; fi
  local k; for ((k = 1; k <= NODES; k++)); do
    live_pid "slurmd-node$k" >/dev/null ||
      nsenter --net="/run/netns/$NET-n$k" --uts="$D/ns/uts-node$k" --ipc="$D/ns/ipc-node$k" slurmd -N "node$k" -f "$SLURM_CONF"
  done
}

nodes_ready() { (($(sinfo -h -N -o '%t' 2>/dev/null | grep -cxE 'idle|mix|alloc|comp') == NODES)); }

up() {
  install_pkgs
  if ((NODES > 1)); then net_up || { log "could not set up the nodes' namespaces"; return 1; }; fi
  if ! live_pid slurmctld >/dev/null; then write_config; fi   # never rewrite under a live ctld
  live_pid munged >/dev/null || munged --socket="$SOCK" --key-file="$D/munge/munge.key" \
    --pid-file="$D/run/munged.pid" --log-file="$D/log/munged.log" --seed-file="$D/munge/munged.seed"
  # -c: start with empty job/node state (forget anything from an earlier run)
  live_pid slurmctld >/dev/null || slurmctld -c -f "$SLURM_CONF"
  start_slurmds
  local i; for ((i = 0; i < T; i++)); do
    nodes_ready && { sinfo; log "up; now run: export SLURM_CONF=$SLURM_CONF"; return 0; }
    sleep 1
  done
  log "nodes not ready after ${T}s"; sinfo >&2 || true; tail -n 20 "$D"/log/*.log >&2 || true
  return 1
}

stop() {  # stop daemon $1 if (and only if) we started it
  local pid i; pid=$(live_pid "$1") || { rm -f "$D/run/$1.pid"; return 0; }
  log "stopping $1 (pid $pid)"; kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 5 * T; i++)); do live_pid "$1" >/dev/null || break; sleep 0.2; done
  if live_pid "$1" >/dev/null; then log "$1 ignored SIGTERM, sending SIGKILL"; kill -9 "$pid" || true; fi
  rm -f "$D/run/$1.pid"
}

down() {
  if live_pid slurmctld >/dev/null; then     # let slurmd clean up running jobs first
    squeue -h -o %A 2>/dev/null | xargs -r scancel || true
    local i; for ((i = 0; i < T; i++)); do
      [[ -z $(squeue -h -o %A 2>/dev/null) ]] && break; sleep 1
    done
  fi
  local n; for n in "${SLURMDS[@]}" slurmctld munged; do stop "$n"; done
  ((NODES == 1)) || net_down
}

link_rate() {  # MBIT or off: each node's eth0 sends at most MBIT Mbit/s (tbf), or at the veth's speed
  [[ $1 == off || $1 =~ ^[1-9][0-9]{0,5}$ ]] || { log "link wants Mbit/s (1 to 999999) or 'off', not '$1'"; return 2; }
  command -v tc >/dev/null || { log "link needs tc: apt-get install iproute2"; return 1; }
  # the bucket holds 10 ms of the rate and at least 256 KiB: the veth hands tbf whole
  # segmentation-offload packets (up to 64 KiB), which a smaller bucket would drop
  local k ns burst=262144 what="the veth's own speed"
  if [[ $1 != off ]]; then
    what="$1 Mbit/s each way"
    ((burst >= $1 * 1250)) || burst=$(($1 * 1250))
  fi
  for ((k = 1; k <= NODES; k++)); do
    ns=/run/netns/$NET-n$k
    [[ -e $ns ]] || { log "no node$k: run up first"; return 1; }
    nsenter --net="$ns" tc qdisc del dev eth0 root 2>/dev/null || true
    [[ $1 == off ]] || nsenter --net="$ns" tc qdisc add dev eth0 root tbf rate "${1}mbit" burst "$burst" latency 200ms ||
      { log "tc could not limit node$k's eth0 (needs the kernel's sch_tbf)"; return 1; }
  done
  log "link between the nodes: $what"
}

crash() {  # NODE: everything in its network namespace killed at once, its link cut
  local k=${1#node} p
  ip netns list | grep -qw "$NET-n$k" || { log "no node '$1'"; return 2; }
  ip link set "$NET-v$k" down
  p=$(ip netns pids "$NET-n$k" | tr '\n' ' ')
  log "crashing $1: SIGKILL to $p"
  kill -9 $p 2>/dev/null || true
}

# Processes of this cluster that no pid file names (a job's slurmstepd or tasks, a daemon's
# child) carry its SLURM_CONF in their environment: once the daemons are down, any left is
# killed, and waited for (bounded). This script's own ancestors (the caller ran `eval
# "$(slurm-local.sh env)"`) and its own children carry it too, and are spared.
related() {  # PID: is it this script, one of its ancestors, or one of its descendants?
  local p=$1 q=$$
  while [[ $q =~ ^[0-9]+$ ]] && ((q > 1)); do   # ancestors of this script (and itself)
    [[ $q == "$p" ]] && return 0
    q=$(awk '{ print $4 }' "/proc/$q/stat" 2>/dev/null) || break
  done
  q=$p
  while [[ $q =~ ^[0-9]+$ ]] && ((q > 1)); do   # descendants: $$ above them
    [[ $q == "$$" ]] && return 0
    q=$(awk '{ print $4 }' "/proc/$q/stat" 2>/dev/null) || break
  done
  return 1
}
alive() {  # PID: running, not a zombie
  local state
  state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) && [[ $state != Z ]]
}
reap_leftovers() {
  local i p left still
  for ((i = 0; i < 5 * T; i++)); do
    left=""
    for p in $(grep -lsxzF "SLURM_CONF=$SLURM_CONF" /proc/[0-9]*/environ 2>/dev/null | sed -E 's|/proc/([0-9]+)/environ|\1|' || true); do
      related "$p" || ! alive "$p" || left+="$p "   # (this script's own short-lived subshells are gone by now)
    done
    [[ -z $left ]] && return 0
    log "killing what the cluster left running: $left"
    kill -9 $left 2>/dev/null || true
    sleep 0.2
    still=""
    for p in $left; do alive "$p" && still+="$p "; done
    [[ -z $still ]] && return 0
  done
  log "still running after SIGKILL: $still"
}

status() {
  local n p rc=0
  for n in "${DAEMONS[@]}"; do
    if p=$(live_pid "$n"); then echo "$n: running (pid $p)"; else echo "$n: stopped"; rc=3; fi
  done
  if ((rc == 0)); then sinfo; squeue; fi
  return $rc
}

[[ $(id -u) == 0 || ${1:-} == env ]] || { log "run as root (e.g. sudo -E $0 $*)"; exit 1; }
case ${1:-} in
  install) install_pkgs ;;
  up) up ;;
  down) trap reap_leftovers EXIT; down ;;   # (the reaping also when a step of down fails)
  status) status ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  crash) ((NODES > 1)) || { log "crash needs SLURM_LOCAL_NODES of 2 or more"; exit 2; }; crash "${2:-}" ;;
  link) ((NODES > 1)) || { log "link needs SLURM_LOCAL_NODES of 2 or more"; exit 2; }; link_rate "${2:-}" ;;
  *) echo "usage: $0 install|up|down|status|env|crash NODE|link MBIT|off" >&2; exit 2 ;;
esac
