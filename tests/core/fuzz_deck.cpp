// libFuzzer target: any bytes as a deck. parse_deck must return a Deck or throw a
// UserError (one line); anything else (a crash, a sanitizer report, another exception, a
// hang) is a bug. Built and run by tests/core/fuzz-deck.sh (clang, not part of CTest).
#include <cstdint>
#include <string>

#include "core/deck.hpp"
#include "core/deck_reading.hpp"
#include "core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    strata::parse_deck(std::string(reinterpret_cast<const char*>(data), size), "fuzz.toml");
  } catch (const strata::UserError&) {
  }
  return 0;
}
