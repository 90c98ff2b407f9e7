#!/usr/bin/env bash
# Builds Kokkos from Debian's own trilinos source (Debian ships Kokkos only as a Serial
# build inside Trilinos), once per machine and backend, into strata's cache
# (scripts/cache-dir.sh: $STRATA_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/strata):
#
#   scripts/build-kokkos.sh openmp   Serial + OpenMP, g++: the CPU presets ("release", "debug")
#   scripts/build-kokkos.sh cuda     Serial + CUDA (sm_90), nvcc_wrapper: the "cuda" preset
#
#   <cache>/kokkos-<backend>-3.4.1-<recipe hash>   the install (lib, cmake config; bin/nvcc_wrapper)
#   <cache>/src/trilinos_13.2.0.orig.tar.gz        Debian's source, downloaded once
#
# and links build/deps/kokkos-<backend>-3.4.1 to it (where the presets look), so every
# clone on the machine reuses one build (OpenMP: about 3 minutes on 2 cores the first
# time; CUDA: 13-16 minutes).
# - The recipe hash covers the backend's CMake options, the patches in
#   scripts/patches/kokkos-<version>/ (each says why: they adapt Kokkos 3.4.1 to CUDA 13
#   and sm_90, and change nothing in a build without CUDA) and the compiler's version: a
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
backend=${1:?usage: scripts/build-kokkos.sh openmp|cuda}
trilinos_version=13.2.0-4
kokkos_version=3.4.1
patches=$root/scripts/patches/kokkos-$kokkos_version
say() { echo "build-kokkos: $*" >&2; }

case "$backend" in
  openmp)
    compiler=$(command -v g++ || true)
    [ -n "$compiler" ] || { say "error: no C++ compiler (g++) on PATH"; exit 1; }
    compiler_version=$("$compiler" --version | head -1)
    options=(-DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON)
    ;;
  cuda)
    nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
    [ -x "$nvcc" ] || { say "error: no CUDA compiler at $nvcc (set CUDA_HOME)"; exit 1; }
    compiler=  # the source's own bin/nvcc_wrapper, known once it is unpacked
    compiler_version=$("$nvcc" --version | tail -2)
    options=(-DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON -DKokkos_ARCH_HOPPER90=ON)
    ;;
  *) say "error: unknown backend '$backend' (openmp or cuda)"; exit 1 ;;
esac
options+=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_TESTS=OFF)

cache=$(scripts/cache-dir.sh)
recipe=$({ cat "$patches"/*.patch; echo "trilinos=$trilinos_version backend=$backend ${options[*]}"; echo "$compiler_version"; } |
         sha256sum | cut -c1-16)
prefix=$cache/kokkos-$backend-$kokkos_version-$recipe
link=$root/build/deps/kokkos-$backend-$kokkos_version
mkdir -p "$cache" "$(dirname "$link")"
use() {  # point the clone's build/deps at the cached install
  if [ -d "$link" ] && [ ! -L "$link" ]; then rm -rf "$link"; fi  # a clone's own build, from before the cache
  ln -sfn "$prefix" "$link"
  echo "$prefix"
}
[ -f "$prefix/.strata-complete" ] && { use; exit 0; }

exec 9> "$cache/kokkos-$backend.lock"
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
# one unpacking, build and staging folder per backend: two backends may build at once
src=$work/kokkos-$kokkos_version-$backend
build=$work/kokkos-build-$backend
staging=$prefix.partial
exec 8> "$cache/kokkos-source.lock"
flock 8   # the download is shared by both backends
if [ ! -f "$tarball" ]; then
  say "fetching Debian's trilinos $trilinos_version source (166 MB)"
  apt-get "${apt_opts[@]}" -qq update
  # into a folder of its own, moved into place when complete: an interrupted download
  # leaves no tarball that a later run would take for a whole one
  rm -rf "$work/download"
  mkdir -p "$work/download"
  (cd "$work/download" && apt-get "${apt_opts[@]}" -qq source --download-only "trilinos=$trilinos_version") >&2
  mv "$work/download/$(basename "$tarball")" "$tarball"
  rm -rf "$work/download"
fi
rm -rf "$src" "$build" "$staging" "$work/extract-$backend"
mkdir -p "$work/extract-$backend"
tar xzf "$tarball" -C "$work/extract-$backend" --wildcards '*/packages/kokkos/*'
flock -u 8
mv "$work/extract-$backend"/*/packages/kokkos "$src"
rm -rf "$work/extract-$backend"
for p in "$patches"/*.patch; do
  say "applying $(basename "$p")"
  patch -s -d "$src" -p1 < "$p"
done
[ -n "$compiler" ] || compiler=$src/bin/nvcc_wrapper

say "building Kokkos $kokkos_version ($backend) into $prefix (once per machine)"
cmake -S "$src" -B "$build" -G "Unix Makefiles" -DCMAKE_CXX_COMPILER="$compiler" \
  -DCMAKE_INSTALL_PREFIX="$prefix" "${options[@]}" >&2
cmake --build "$build" -j "$(nproc)" >&2
DESTDIR=$staging cmake --install "$build" >&2
rm -rf "$prefix"
mv "$staging$prefix" "$prefix"
rm -rf "$staging" "$build" "$src"
date -u +%FT%TZ > "$prefix/.strata-complete"
use
