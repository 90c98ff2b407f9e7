#!/usr/bin/env bash
# Fuzzes the deck parser (the TOML text checks, toml11, the core's key table, the cross-key
# rules; a model kind's keys are unknown to it, so a deck of inputs/ is refused early) with
# libFuzzer and AddressSanitizer for SECONDS (default 300), starting from inputs/*.toml.
# Needs clang and its runtime (Debian: clang, libclang-rt-14-dev); not part of CTest.
# A finding is written to build/fuzz/crash-* (or timeout-*, oom-*); the exit code is
# libFuzzer's (0: nothing found). Usage: tests/core/fuzz-deck.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-300}
out=build/fuzz
mkdir -p "$out/corpus"
cp inputs/*.toml "$out/corpus/"
clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address -Isrc -I. tests/core/fuzz_deck.cpp \
  src/core/layout.cpp src/core/deck_reading.cpp src/core/deck_keys.cpp src/core/toml_text.cpp -o "$out/fuzz_deck"
cd "$out"
exec ./fuzz_deck -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 -timeout=5 corpus
