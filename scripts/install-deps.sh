#!/usr/bin/env bash
# Installs the Debian 12 packages strata builds and tests with. Idempotent: packages that
# are already installed are skipped, and nothing is done when all are present.
set -euo pipefail

# Each one is needed on a bare Debian 12 (scripts/check-bare-debian.sh proves the list):
# the build (compilers, CMake, git for the version's commit), the libraries, the Python
# modules of the reference checks, the data, the Slurm cluster of the job-script test, and
# the tools the test scripts call (procps: pgrep/pkill; bc: fault timings), ccache (every
# clone's objects compiled once per machine: scripts/compiler-launcher.sh) and
# environment-modules (the installed tree's module file, tested by `module load`). Kokkos
# is no package here: scripts/build-kokkos.sh builds it (OpenMP) from Debian's trilinos
# source, since Debian's libtrilinos-kokkos-dev is Serial only (a rank on one core).
packages=(
  build-essential cmake pkg-config git
  mpich libmpich-dev zlib1g-dev
  libhdf5-mpich-dev hdf5-tools
  libopenblas-openmp-dev
  libdnnl-dev libsentencepiece-dev
  libtoml11-dev libcli11-dev catch2 libbenchmark-dev
  python3-h5py python3-numpy python3-torch python3-matplotlib python3-sentencepiece
  fortunes dataset-fashion-mnist
  slurm-wlm munge
  procps bc
  ccache environment-modules
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${#missing[@]} Debian packages: ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo); else
    echo "install-deps: error: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo_cmd[@]}" apt-get update -qq; then
  echo "install-deps: error: 'apt-get update' failed; cannot install: ${missing[*]}" >&2; exit 1
fi
if ! "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/strata-apt.log 2>&1; then
  tail -20 /tmp/strata-apt.log >&2
  echo "install-deps: error: apt-get install failed for: ${missing[*]} (log: /tmp/strata-apt.log)" >&2; exit 1
fi
echo "install-deps: done"
