#pragma once
// The test cases tagged [bf16] need bf16 products (kernels::bf16_products_unavailable()).
// CTest runs them as entries of their own (kernels_bf16, mpi_np*_bf16) with
// STRATA_TEST_REQUIRE_BF16=1 in their environment, and the test programs' mains call
// bf16_gate() first: where the products cannot run, the program runs no case and exits 77,
// CTest's SKIP_RETURN_CODE, so the summary lists them as skipped rather than passed. A
// [bf16] case run by hand there fails, naming the reason (REQUIRE_BF16_PRODUCTS).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/matmul_bf16.hpp"

namespace strata::test {

constexpr int kSkippedExitCode = 77;

// kSkippedExitCode (after one line on stdout from rank 0, print) where bf16 products are
// required by the environment and cannot run; 0 otherwise.
inline int bf16_gate(bool print) {
  const char* required = std::getenv("STRATA_TEST_REQUIRE_BF16");
  if (required == nullptr || std::string(required) != "1") return 0;
  const std::string why = kernels::bf16_products_unavailable();
  if (why.empty()) return 0;
  if (print) std::printf("skipped: the [bf16] cases need bf16 products, which cannot run here: %s\n", why.c_str());
  return kSkippedExitCode;
}

}  // namespace strata::test

#define REQUIRE_BF16_PRODUCTS()                                                                             \
  do {                                                                                                      \
    const std::string why_bf16_ = ::strata::kernels::bf16_products_unavailable();                           \
    if (!why_bf16_.empty())                                                                                 \
      FAIL("bf16 products cannot run here (" << why_bf16_ << "): CTest's *_bf16 entries skip these cases"); \
  } while (0)
