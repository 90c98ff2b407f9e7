#pragma once
// Device-callable math functions under one name for Kokkos 3.4 (Kokkos::Experimental::)
// and Kokkos >= 3.7 / 4.x (Kokkos::).
#include <Kokkos_Core.hpp>

namespace strata {
#if KOKKOS_VERSION >= 30700
namespace kmath = ::Kokkos;
#else
namespace kmath = ::Kokkos::Experimental;
#endif
}  // namespace strata
