#!/usr/bin/env bash
# The bare-Debian check: proves that the README's two commands set strata up and pass on a
# freshly installed Debian 12 that has nothing but apt, git and ca-certificates.
#
# 1. mmdebstrap builds a bare bookworm root (variant apt, plus git and ca-certificates)
#    from this machine's own apt sources and apt configuration files;
# 2. the repository's HEAD (committed work only) is cloned into it;
# 3. /proc, /sys (recursively: the cgroup mounts slurmd needs), /dev, /dev/pts (and a
#    fresh /dev/shm for MPI) are bound into it, /etc/hosts written as an installed system
#    has it (mmdebstrap writes none; munged and slurmd look the host name up), and the
#    machine's CUDA toolkit bound read-only at /usr/local/cuda when it has one (CUDA is
#    not a Debian package: a GPU workstation installs it itself), so that test.sh compiles
#    the GPU build there too (STRATA_BARE_CUDA=0: leave it out);
# 4. inside, with chroot and a clean environment: scripts/run-example.sh, then
#    scripts/test.sh, then (STRATA_BARE_SECOND_CLONE=0 leaves it out) a second clone's
#    scripts/test.sh, which takes what the first built once per machine from strata's cache
#    (~/.cache/strata: the CUDA Kokkos, ccache's objects), each one's wall time and exit
#    code printed;
# 5. everything is unmounted on any exit (an error, Ctrl-C, a kill).
#
# Needs root (mmdebstrap's root mode, mount, chroot) and the network to Debian's mirror;
# takes about 45 minutes on 2 cores. Not part of .ci/run: run it before resolving an issue
# that changes dependencies, build scripts or presets; docs/tests.md keeps its result.
#
#   sudo scripts/check-bare-debian.sh            # root in /var/tmp/strata-bare-debian
#   STRATA_BARE_ROOT=/scratch/bare scripts/check-bare-debian.sh
#   STRATA_BARE_KEEP=1 ...                       # keep the root afterwards, to look inside
#
# Each command's output goes to $STRATA_BARE_ROOT.logs/<command>.log (kept).
#
# Environment passed into the root: STRATA_SKIP_CUDA.
# Exit code: 0 when both commands exit 0; otherwise 1.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
say() { echo "check-bare-debian: $*"; }
die() { echo "check-bare-debian: error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap in root mode, mount and chroot): run it with sudo"
root=${STRATA_BARE_ROOT:-/var/tmp/strata-bare-debian}
case "$root/" in "$repo"/*) die "STRATA_BARE_ROOT ($root) must lie outside the repository" ;; esac
head=$(git rev-parse HEAD)
if ! git diff --quiet HEAD; then
  say "note: uncommitted changes are not checked (the root gets HEAD, $(git rev-parse --short HEAD))"
fi

if ! command -v mmdebstrap >/dev/null 2>&1; then
  say "installing mmdebstrap"
  apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

# this machine's apt sources and configuration, as the bare system's own
sources=()
[ -s /etc/apt/sources.list ] && grep -q '^[[:space:]]*deb' /etc/apt/sources.list && sources+=(/etc/apt/sources.list)
for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || die "no apt sources found in /etc/apt"
aptopts=()
for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
  [ -f "$f" ] && aptopts+=(--aptopt="$f")
done

mounts=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -R "${mounts[i]}" 2>/dev/null || umount -R -l "${mounts[i]}" 2>/dev/null ||
      echo "check-bare-debian: warning: could not unmount ${mounts[i]}" >&2
  done
  # and what the root's own programs mounted in it (`ip netns add` binds its /run/netns
  # onto itself, and that mount outlives the namespaces), deepest first
  local m
  for m in $(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || echo "check-bare-debian: warning: could not unmount $m" >&2
  done
  if [ "${STRATA_BARE_KEEP:-0}" != 1 ] && [ -d "$root" ] && ! grep -q " $root" /proc/mounts; then
    rm -rf --one-file-system "$root"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if grep -q " $root" /proc/mounts; then die "something is still mounted under $root: unmount it first"; fi
rm -rf --one-file-system "$root"
logs=$root.logs
mkdir -p "$logs"
say "building a bare Debian 12 root in $root (mmdebstrap, variant apt, + git ca-certificates)"
start=$(date +%s)
mmdebstrap --quiet --variant=apt --include=git,ca-certificates "${aptopts[@]}" bookworm "$root" "${sources[@]}" ||
  die "mmdebstrap failed"
say "root built in $(( $(date +%s) - start )) s: $(chroot "$root" dpkg-query -W -f='.\n' | wc -l) packages"

git clone -q "$repo" "$root/strata"
git -C "$root/strata" checkout -q "$head"
short=$(git rev-parse --short "$head")
say "cloned $short into $root/strata"

bind() {  # [--rbind] PATH: PATH of this machine at the same place in the root
  local how=--bind
  if [ "$1" = --rbind ]; then how=--rbind; shift; fi
  mkdir -p "$root$1"
  mount "$how" "$1" "$root$1"
  mounts+=("$root$1")
  # slave: unmounting the root's copies never propagates back to this machine's mounts
  [ "$how" = --rbind ] && mount --make-rslave "$root$1"
  return 0
}
bind /proc
bind --rbind /sys
bind /dev
bind /dev/pts
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
mounts+=("$root/dev/shm")
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$(hostname)" > "$root/etc/hosts"
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ "${STRATA_BARE_CUDA:-1}" = 1 ] && [ -x "$cuda/bin/nvcc" ]; then
  cuda=$(realpath "$cuda")
  bind "$cuda"
  mount -o remount,bind,ro "$root$cuda"
  [ "$cuda" = /usr/local/cuda ] || ln -sfn "$cuda" "$root/usr/local/cuda"
  say "CUDA toolkit $cuda bound read-only: test.sh compiles the GPU build"
else
  say "no CUDA toolkit bound: test.sh skips the GPU build"
fi

# one README command inside the root, in a clean environment: its wall time and exit code
results=()
in_root() {
  local name=$1
  shift
  say "running $name in the bare root (output: $logs/$name.log)"
  local t0 rc=0
  t0=$(date +%s)
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TERM=dumb LANG=C.UTF-8 STRATA_SKIP_CUDA="${STRATA_SKIP_CUDA:-0}" \
    /bin/bash -c "cd /strata && $*" > "$logs/$name.log" 2>&1 || rc=$?
  local secs=$(( $(date +%s) - t0 ))
  tail -25 "$logs/$name.log"
  results+=("$(printf '%-16s exit %3d  %5d s (%dm%02ds)' "$name" "$rc" "$secs" $((secs / 60)) $((secs % 60)))")
  return "$rc"
}
status=0
in_root run-example scripts/run-example.sh || status=1
in_root test scripts/test.sh || status=1
if [ "${STRATA_BARE_SECOND_CLONE:-1}" = 1 ]; then
  in_root second-clone "git clone -q /strata /strata-second && cd /strata-second && scripts/test.sh" || status=1
fi

{
  say "results (Debian 12 bare root, HEAD $short, $(nproc) cores, $(date -u +%F)):"
  for r in "${results[@]}"; do echo "  $r"; done
} | tee "$logs/results.txt"
[ "$status" -eq 0 ] && say "both README commands passed" || say "FAILED"
exit "$status"
