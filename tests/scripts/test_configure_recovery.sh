#!/usr/bin/env bash
# scripts/configure.sh (what build.sh and build-cuda.sh configure through) recovers from a
# configure that failed or was interrupted: the next run configures again and succeeds
# once the cause is gone, instead of finding CMakeCache.txt and skipping to a build with
# no Makefile (the bare-Debian failure: "gmake: Makefile: No such file or directory").
# Runs the real script on a one-file CMake project whose configure fails while a
# "missing dependency" file is absent, or sleeps to be interrupted.
# Usage: test_configure_recovery.sh REPO_DIR
set -u
repo=$(realpath "$1")
source "$(dirname "$0")/../support/test_lib.sh"
cd "$work"
mkdir -p scripts
cp "$repo/scripts/configure.sh" scripts/
cat > CMakeLists.txt <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(recovery NONE)
if(EXISTS ${CMAKE_SOURCE_DIR}/slow)
  execute_process(COMMAND sleep 30)
endif()
if(NOT EXISTS ${CMAKE_SOURCE_DIR}/dependency)
  message(FATAL_ERROR "dependency not installed")
endif()
add_custom_target(hello ALL COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_BINARY_DIR}/built)
CMAKE
cat > CMakePresets.json <<'JSON'
{"version": 3, "configurePresets": [{"name": "release", "binaryDir": "${sourceDir}/build/release"}],
 "buildPresets": [{"name": "release", "configurePreset": "release"}]}
JSON
build() { scripts/configure.sh release && cmake --build --preset release >/dev/null 2>&1; }

# (1) a configure that fails: an error naming the log, a cache without a Makefile left behind
if build 2>err.txt; then fail "configure passed without its dependency"; fi
if grep -q "dependency not installed" err.txt && grep -q "configure: error: 'cmake --preset release' failed" err.txt &&
   [ -f build/release/CMakeCache.txt ] && [ ! -f build/release/Makefile ]; then
  ok "a failed configure: one error line and the cause, a cache and no Makefile left"
else
  fail "a failed configure:"; cat err.txt
fi
# ... then, the dependency installed, the same command configures again and builds
touch dependency
if build 2>err.txt && [ -f build/release/built ]; then
  ok "after the cause is fixed, the next run configures again and builds"
else
  fail "the run after a fixed failure:"; cat err.txt
fi
# a configured tree is not configured again (the build re-runs cmake itself when needed)
stamp=$(stat -c %y build/release/Makefile)  # to the nanosecond: no sleep needed to see a rewrite
if build && [ "$(stat -c %y build/release/Makefile)" = "$stamp" ]; then
  ok "a configured tree is left as it is"
else
  fail "a configured tree was configured again"
fi

# (2) an interrupted configure (killed mid-way) is run again by the next command
rm -rf build
touch slow
scripts/configure.sh release >/dev/null 2>&1 &
job=$!
cmake_pid="" sleep_pid=""
for _ in $(seq 1 100); do  # this test's own processes only: configure.sh -> cmake -> sleep
  cmake_pid=$(pgrep -P $job cmake) && sleep_pid=$(pgrep -P "$cmake_pid" sleep) && break
  sleep 0.1
done
kill -KILL $cmake_pid 2>/dev/null  # inside configure, as a lost node or a kill would
wait $job 2>/dev/null
kill -KILL $sleep_pid 2>/dev/null
rm -f slow
if [ -d build/release/CMakeFiles ] && [ ! -f build/release/Makefile ] && build && [ -f build/release/built ]; then
  ok "an interrupted configure is run again by the next command, which builds"
else
  fail "after an interrupted configure: $(ls build/release 2>&1)"
fi
finish
