#pragma once
// Which SGEMM kernels OpenBLAS runs, for the start-up log. OpenBLAS chooses them once, when
// it is loaded, from the CPU or from OPENBLAS_CORETYPE; the rate differs twofold between
// its AVX2 ("Haswell") and AVX-512 ("SkylakeX", "Cooperlake") kernels on this VM's CPU.
#include <string>

namespace strata {

// The kernel family OpenBLAS runs ("Cooperlake", "Haswell", ...), "" for another BLAS.
std::string blas_core_name();

// How the loaded OpenBLAS threads: "OpenMP" (the rank's own pool: what CPU builds link),
// "pthreads" (a pool of its own), "sequential"; "" for another BLAS.
std::string blas_threading();

}  // namespace strata
