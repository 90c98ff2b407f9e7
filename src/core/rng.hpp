#pragma once
// Counter-based random numbers: a value is a pure function of (seed, stream, index), so
// any rank can produce any element of any global tensor without generating the others.
// This is what makes every rank layout start from identical global weights, and every
// layout draw identical global batches.
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include "core/kmath.hpp"

namespace strata {

// splitmix64 finaliser: a bijective 64-bit mix with good avalanche.
KOKKOS_INLINE_FUNCTION uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

KOKKOS_INLINE_FUNCTION uint64_t counter_hash(uint64_t seed, uint64_t stream, uint64_t index) {
  return mix64(mix64(seed ^ mix64(stream)) ^ mix64(index + 0x632BE59BD9B4E019ull));
}

// Uniform in (0, 1), never 0 (safe for log).
KOKKOS_INLINE_FUNCTION double counter_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return (double((counter_hash(seed, stream, index) >> 11)) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal by Box-Muller over two independent counters.
KOKKOS_INLINE_FUNCTION double counter_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const double u1 = counter_uniform(seed, stream, 2 * index);
  const double u2 = counter_uniform(seed, stream, 2 * index + 1);
  return kmath::sqrt(-2.0 * kmath::log(u1)) * kmath::cos(6.283185307179586 * u2);
}

// Stable 64-bit FNV-1a of a name (host side): the stream id of a named tensor.
inline uint64_t name_stream(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace strata
