#pragma once
// What this strata is and where its shipped files are.
#include <string>

namespace strata {

// `strata --version`: the version, the git commit it was built from, the build type, and
// what runs its kernels (Kokkos' backends, BLAS, the bf16 products' library).
std::string version_text();

// The shipped machine files: beside an installed strata (PREFIX/share/strata/machines,
// found from the executable's own path), else in the source tree it was built from.
std::string machines_dir();

}  // namespace strata
