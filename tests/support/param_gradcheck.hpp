#pragma once
// The gradient check of a model's parameters: the gradients in store (computed by the
// caller, for the loss that loss() returns from the store's current parameters) against
// central differences, tensor by tensor (relative to each tensor's largest value). The
// parameters are as they were afterwards.
#include <catch2/catch.hpp>
#include <functional>

#include "state/param_store.hpp"
#include "support/host_views.hpp"

namespace strata::test {

inline void check_param_gradients(ParamStore<double>& store, const std::function<double()>& loss, double h = 1e-5,
                                  double tolerance = 1e-7) {
  const auto analytic = to_host<double>(store.grads());
  std::vector<double> p = to_host<double>(store.params());
  const auto set_params = [&] {
    auto host = Kokkos::create_mirror_view(store.params());
    for (size_t i = 0; i < p.size(); ++i) host(i) = p[i];
    Kokkos::deep_copy(store.params(), host);
  };
  const auto numeric = numeric_gradient(
      p,
      [&] {
        set_params();
        return loss();
      },
      h);
  set_params();
  for (const auto& info : store.infos()) {
    std::vector<double> a(analytic.begin() + info.offset, analytic.begin() + info.offset + info.numel);
    std::vector<double> b(numeric.begin() + info.offset, numeric.begin() + info.offset + info.numel);
    INFO(info.name);
    REQUIRE(max_rel_error(a, b) < tolerance);
  }
}

}  // namespace strata::test
