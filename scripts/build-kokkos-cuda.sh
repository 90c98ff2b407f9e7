#!/usr/bin/env bash
# Builds a CUDA-enabled Kokkos from Debian's own trilinos source (Debian ships Kokkos only
# as a Serial build inside Trilinos), once per machine, into strata's cache
# (scripts/cache-dir.sh: $STRATA_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/strata):
#
#   <cache>/kokkos-cuda-3.4.1-<recipe hash>    the install (bin/nvcc_wrapper, lib, cmake config)
#   <cache>/src/trilinos_13.2.0.orig.tar.gz    Debian's source, downloaded once
#
# and links build/deps/kokkos-cuda-3.4.1 to it (where the "cuda" preset looks), so every
# clone on the machine reuses one build (13-16 minutes on 2 cores the first time).
# - The recipe hash covers this script, the patches in scripts/patches/kokkos-<version>/
#   (each says why: they adapt Kokkos 3.4.1 to CUDA 13 and sm_90) and nvcc's version: a
#   changed recipe builds anew beside the old one, which stays until the cache is cleared.
# - Never trusted half-built: the install goes to a temporary folder beside its final name
#   (installed there with DESTDIR, so its files name the final prefix) and is renamed into
#   place only once complete; a lock serialises clones that build at the same time.
# - The source comes from `apt-get source` with private apt directories in the cache: the
#   machine's apt configuration is not touched.
#
# Prints the install prefix on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
trilinos_version=13.2.0-4
kokkos_version=3.4.1
patches=$root/scripts/patches/kokkos-$kokkos_version
nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
if [ ! -x "$nvcc" ]; then
  echo "build-kokkos-cuda: error: no CUDA compiler at $nvcc (set CUDA_HOME)" >&2
  exit 1
fi
cache=$(scripts/cache-dir.sh)
recipe=$({ cat "$0" "$patches"/*.patch; echo "trilinos=$trilinos_version"; "$nvcc" --version | tail -2; } |
         sha256sum | cut -c1-16)
prefix=$cache/kokkos-cuda-$kokkos_version-$recipe
link=$root/build/deps/kokkos-cuda-$kokkos_version
mkdir -p "$cache" "$(dirname "$link")"
use() {  # point the clone's build/deps at the cached install
  if [ -d "$link" ] && [ ! -L "$link" ]; then rm -rf "$link"; fi  # a clone's own build, from before the cache
  ln -sfn "$prefix" "$link"
  echo "$prefix"
}
[ -f "$prefix/.strata-complete" ] && { use; exit 0; }

exec 9> "$cache/kokkos-cuda.lock"
flock 9   # another clone may be building it right now: wait, then take its result
[ -f "$prefix/.strata-complete" ] && { use; exit 0; }

work=$cache/src
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
build=$work/kokkos-build
staging=$prefix.partial
rm -rf "$src" "$build" "$staging" "$work/extract"
mkdir -p "$work/extract"
tar xzf "$tarball" -C "$work/extract" --wildcards '*/packages/kokkos/*'
mv "$work/extract"/*/packages/kokkos "$src"
rm -rf "$work/extract"
for p in "$patches"/*.patch; do
  echo "build-kokkos-cuda: applying $(basename "$p")" >&2
  patch -s -d "$src" -p1 < "$p"
done

echo "build-kokkos-cuda: building Kokkos $kokkos_version for CUDA into $prefix (once per machine)" >&2
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
DESTDIR=$staging cmake --install "$build" >&2
rm -rf "$prefix"
mv "$staging$prefix" "$prefix"
rm -rf "$staging" "$build" "$src"
date -u +%FT%TZ > "$prefix/.strata-complete"
use
