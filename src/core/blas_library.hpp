#pragma once
// Which SGEMM kernels OpenBLAS runs, for the start-up log. OpenBLAS chooses them once, when
// it is loaded, from the CPU or from OPENBLAS_CORETYPE; the rate differs twofold between
// its AVX2 ("Haswell") and AVX-512 ("SkylakeX", "Cooperlake") kernels on this VM's CPU.
#include <string>

namespace strata {

// The kernel family OpenBLAS runs ("Cooperlake", "Haswell", ...), "" for another BLAS.
std::string blas_core_name();

// OpenBLAS picks its kernels from a table of CPU models, and one it does not know gets its
// oldest: Debian 12's 0.3.21 runs "Prescott" (SSE3) kernels on Sapphire and Emerald Rapids,
// 3.6x slower than its AVX-512 ones there. The family to ask for instead (OPENBLAS_CORETYPE),
// by the vector units the CPU has: "SkylakeX" with AVX-512 (F, BW, DQ, VL), "Haswell" with
// AVX2 and FMA, "Sandybridge" with AVX; "" when OpenBLAS's own choice is as good (or it is
// not OpenBLAS), when OPENBLAS_CORETYPE is set (the user's choice stands), or when
// STRATA_BLAS_CHOSEN says this process was started again with the choice already.
std::string better_blas_core();
// Starts this program again, the same arguments and environment, with OPENBLAS_CORETYPE =
// core and STRATA_BLAS_CHOSEN = what OpenBLAS had picked (so that the new process does not
// start again and can say what it replaced). Before MPI starts; returns only on failure.
void restart_with_blas_core(const std::string& core, char** argv);
// "" or, in a process restarted by restart_with_blas_core, e.g. "SkylakeX kernels chosen by
// strata (OpenBLAS picked Prescott on this CPU; OPENBLAS_CORETYPE overrides)".
std::string blas_choice_note();

// How the loaded OpenBLAS threads: "OpenMP" (the rank's own pool: what CPU builds link),
// "pthreads" (a pool of its own), "sequential"; "" for another BLAS.
std::string blas_threading();

}  // namespace strata
