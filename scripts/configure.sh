#!/usr/bin/env bash
# Configures the CMake preset named by $1 unless its build tree is already configured:
# a configure that fails still saves CMakeCache.txt, but the generator's Makefile exists
# only once configure and generate have succeeded, so a tree with a cache and no Makefile
# (a failed or interrupted configure) is configured again, from a fresh cache (a failed
# configure caches wrong results, e.g. a NOTFOUND library that has been installed since).
# Once configured, `cmake --build` re-runs configure by itself when a CMakeLists changes.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:?usage: scripts/configure.sh PRESET}
dir=build/$preset
if [ -f "$dir/CMakeCache.txt" ] && { [ -f "$dir/Makefile" ] || [ -f "$dir/build.ninja" ]; }; then
  exit 0
fi
rm -f "$dir/CMakeCache.txt"
mkdir -p build
if ! cmake --preset "$preset" > "build/configure-$preset.log" 2>&1; then
  grep -v '^--' "build/configure-$preset.log" | tail -30 >&2
  echo "configure: error: 'cmake --preset $preset' failed (log: build/configure-$preset.log); fix the cause and run the command again" >&2
  exit 1
fi
