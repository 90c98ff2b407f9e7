#pragma once
// Test helpers: move data between std::vector and device views, deterministic random
// fills, and a central-difference gradient of a scalar function.
#include <cmath>
#include <functional>
#include <vector>

#include "core/rng.hpp"
#include "core/tensor.hpp"

namespace strata::test {

template <class T>
std::vector<T> random_vector(size_t n, uint64_t stream, double scale = 1.0) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = T(scale * counter_normal(1234, stream, i));
  return v;
}

// n token ids below vocab, a pure function of (stream, index).
inline std::vector<int32_t> hashed_tokens(int64_t n, int64_t vocab, uint64_t stream) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = int32_t(counter_hash(1, stream, uint64_t(i)) % uint64_t(vocab));
  return v;
}

template <class T>
Tensor1<T> to_device(const std::vector<T>& h) {
  Tensor1<T> d("test", h.size());
  auto m = Kokkos::create_mirror_view(d);
  for (size_t i = 0; i < h.size(); ++i) m(i) = h[i];
  Kokkos::deep_copy(d, m);
  return d;
}

template <class T, class View>
std::vector<T> to_host(const View& d) {
  std::vector<T> h(d.size());
  Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> hv(h.data(), h.size());
  Kokkos::View<const T*, Kokkos::LayoutRight, MemSpace, Unmanaged> flat(d.data(), d.size());
  Kokkos::deep_copy(hv, flat);
  return h;
}

// Reshape helpers onto a flat device buffer.
template <class T>
V2<T> mat(const Tensor1<T>& t, int64_t r, int64_t c) {
  return V2<T>(t.data(), r, c);
}
template <class T>
V3<T> cube(const Tensor1<T>& t, int64_t a, int64_t b, int64_t c) {
  return V3<T>(t.data(), a, b, c);
}

// d f / d x[i] by central differences, for every i (x is perturbed in place and restored).
inline std::vector<double> numeric_gradient(std::vector<double>& x, const std::function<double()>& f, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f();
    x[i] = x0 - h;
    const double fm = f();
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

// max |a-b| / max(1, max|b|): a relative error that does not blow up near zero.
inline double max_rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / std::max(den, 1.0);
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace strata::test
