// Catch2 main for single-process tests: Kokkos lives for the whole test run.
#define CATCH_CONFIG_RUNNER
#include <Kokkos_Core.hpp>
#include <catch2/catch.hpp>

#include "support/bf16_gate.hpp"

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  if (const int skipped = strata::test::bf16_gate(true); skipped != 0) return skipped;
  return Catch::Session().run(argc, argv);
}
