// Catch2 main for tests run under mpiexec: MPI and Kokkos live for the whole run, and
// every rank runs every test case (they are collective).
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <catch2/catch.hpp>

#include "support/bf16_gate.hpp"

int main(int argc, char** argv) {
  int provided = 0;  // Kokkos' and the BLAS's OpenMP threads never call MPI
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int result = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    // every rank sees the same machine, so all skip or none
    if (const int skipped = strata::test::bf16_gate(rank == 0); skipped != 0) {
      MPI_Finalize();
      return skipped;
    }
    result = Catch::Session().run(argc, argv);
  }
  // A rank whose assertions failed must take the job down, not leave the others waiting.
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
