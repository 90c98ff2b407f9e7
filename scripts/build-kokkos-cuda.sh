#!/usr/bin/env bash
# Builds a CUDA-enabled Kokkos from Debian's own trilinos source (Debian ships Kokkos only
# as a Serial build inside Trilinos) and installs it into build/deps/kokkos-cuda-<version>.
#
# - The source comes from `apt-get source` with private apt directories under build/deps:
#   the machine's apt configuration is not touched.
# - Only packages/kokkos is extracted; the patches in scripts/patches/kokkos-<version>/
#   (each says why) adapt Kokkos 3.4.1 to CUDA 13 and sm_90.
# - Idempotent and cached by version: a finished install (with its stamp) is reused.
#
# Prints the install prefix on its last line. Env: STRATA_DEPS_DIR (default build/deps).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
trilinos_version=13.2.0-4
kokkos_version=3.4.1
deps=${STRATA_DEPS_DIR:-$root/build/deps}
prefix=$deps/kokkos-cuda-$kokkos_version
stamp=$prefix/.strata-stamp
patches=$root/scripts/patches/kokkos-$kokkos_version
want_stamp="trilinos=$trilinos_version $(cat "$patches"/*.patch | sha256sum | cut -c1-16)"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ]; then
  echo "$prefix"
  exit 0
fi

nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
if [ ! -x "$nvcc" ]; then
  echo "build-kokkos-cuda: error: no CUDA compiler at $nvcc (set CUDA_HOME)" >&2
  exit 1
fi

work=$deps/src
mkdir -p "$work/apt/lists/partial" "$work/apt/sources"
cat > "$work/apt/sources/debian-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/apt/sources"
          -o "Dir::State::Lists=$work/apt/lists" -o Debug::NoDropPrivs=true)
tarball=$work/trilinos_13.2.0.orig.tar.gz
if [ ! -f "$tarball" ]; then
  echo "build-kokkos-cuda: fetching Debian's trilinos $trilinos_version source (166 MB)" >&2
  apt-get "${apt_opts[@]}" -qq update
  # into a folder of its own, moved into place when complete: an interrupted download
  # leaves no tarball that a later run would take for a whole one
  rm -rf "$work/download"
  mkdir -p "$work/download"
  (cd "$work/download" && apt-get "${apt_opts[@]}" -qq source --download-only "trilinos=$trilinos_version") >&2
  mv "$work/download/$(basename "$tarball")" "$tarball"
  rm -rf "$work/download"
fi
src=$work/kokkos-$kokkos_version
rm -rf "$src" "$work/extract"
mkdir -p "$work/extract"
tar xzf "$tarball" -C "$work/extract" --wildcards '*/packages/kokkos/*'
mv "$work/extract"/*/packages/kokkos "$src"
rm -rf "$work/extract"
for p in "$patches"/*.patch; do
  echo "build-kokkos-cuda: applying $(basename "$p")" >&2
  patch -s -d "$src" -p1 < "$p"
done

build=$work/kokkos-build
rm -rf "$build" "$prefix"
cmake -S "$src" -B "$build" -G "Unix Makefiles" \
  -DCMAKE_CXX_COMPILER="$src/bin/nvcc_wrapper" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_STANDARD=17 \
  -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DKokkos_ENABLE_SERIAL=ON \
  -DKokkos_ENABLE_CUDA=ON \
  -DKokkos_ENABLE_CUDA_LAMBDA=ON \
  -DKokkos_ARCH_HOPPER90=ON \
  -DKokkos_ENABLE_TESTS=OFF >&2
cmake --build "$build" -j "$(nproc)" >&2
cmake --install "$build" >&2
echo "$want_stamp" > "$stamp"
echo "$prefix"
