// Catch2 main for single-process tests: Kokkos lives for the whole test run.
#define CATCH_CONFIG_RUNNER
#include <Kokkos_Core.hpp>
#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  return Catch::Session().run(argc, argv);
}
