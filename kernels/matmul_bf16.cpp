#include "kernels/matmul_bf16.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#ifdef STRATA_HAVE_DNNL
#include <omp.h>

#include <cstdlib>
#include <dnnl.hpp>
#endif

namespace strata::kernels {

float round_to_bf16(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) {  // infinities stay, NaNs stay NaN
    const bool nan = (u & 0x007fffffu) != 0;
    u &= 0xffff0000u;
    if (nan) u |= 0x00400000u;
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);  // to nearest, ties to even
    u &= 0xffff0000u;
  }
  float y = 0;
  std::memcpy(&y, &u, sizeof y);
  return y;
}

namespace {

bool cpu_has_bf16_products() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = (d >> 22) & 1u;
  const unsigned max_subleaf = a;
  bool avx512_bf16 = false;
  if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) avx512_bf16 = (a >> 5) & 1u;
  return avx512_bf16 || amx_bf16;
#else
  return false;
#endif
}

}  // namespace

std::string bf16_products_unavailable() {
#ifndef STRATA_HAVE_DNNL
  return "this build has no oneDNN (CUDA builds: bf16 products on the GPU are not written yet)";
#else
  if (!cpu_has_bf16_products()) return "this CPU has neither AVX512-BF16 nor AMX-BF16";
  return "";
#endif
}

#ifdef STRATA_HAVE_DNNL
namespace {

using dnnl_dt = dnnl::memory::data_type;

// One shape's matmul and the reorders that round its operands to bf16, made once.
struct Bf16Product {
  dnnl::memory::desc a_f32, b_f32, c_f32;  // the caller's float layouts (strides)
  dnnl::memory a_bf16, b_bf16;             // dense bf16 copies of the operands
  dnnl::reorder round_a, round_b;
  dnnl::matmul product;
};

class Bf16Products {
 public:
  static Bf16Products& instance() {
    static Bf16Products p;
    return p;
  }
  void run(bool ta, bool tb, V2<const float> a, V2<const float> b, float beta, V2<float> c) {
    const int64_t m = int64_t(c.extent(0)), n = int64_t(c.extent(1));
    const int64_t k = ta ? int64_t(a.extent(0)) : int64_t(a.extent(1));
    if ((ta ? a.extent(1) : a.extent(0)) != c.extent(0) || (tb ? b.extent(1) : b.extent(0)) != size_t(k) ||
        (tb ? b.extent(0) : b.extent(1)) != c.extent(1))
      throw std::logic_error("matmul_bf16: operand shapes do not match");
    const auto key = std::make_tuple(m, n, k, ta, tb, beta, int64_t(a.stride(0)), int64_t(b.stride(0)),
                                     int64_t(c.stride(0)));
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, make(ta, tb, m, n, k, beta, a, b, c)).first;
    Bf16Product& p = it->second;
    dnnl::memory a_user(p.a_f32, engine_, const_cast<float*>(a.data()));
    dnnl::memory b_user(p.b_f32, engine_, const_cast<float*>(b.data()));
    dnnl::memory c_user(p.c_f32, engine_, c.data());
    p.round_a.execute(stream_, a_user, p.a_bf16);
    p.round_b.execute(stream_, b_user, p.b_bf16);
    p.product.execute(stream_, {{DNNL_ARG_SRC, p.a_bf16}, {DNNL_ARG_WEIGHTS, p.b_bf16}, {DNNL_ARG_DST, c_user}});
    stream_.wait();
  }

 private:
  // oneDNN runs on OpenMP threads: one per rank, as BLAS, unless OMP_NUM_THREADS says
  // otherwise (an MPI job has a rank per core).
  Bf16Products() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    if (!std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(1);
  }

  // The logical (rows, cols) matrix of a row-major view with leading dimension ld,
  // transposed or not.
  static dnnl::memory::desc logical(int64_t rows, int64_t cols, int64_t ld, bool transposed, dnnl_dt type) {
    return transposed ? dnnl::memory::desc({rows, cols}, type, dnnl::memory::dims{1, ld})
                      : dnnl::memory::desc({rows, cols}, type, dnnl::memory::dims{ld, 1});
  }

  Bf16Product make(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float beta, V2<const float> a,
                   V2<const float> b, V2<float> c) {
    Bf16Product p;
    p.a_f32 = logical(m, k, int64_t(a.stride(0)), ta, dnnl_dt::f32);
    p.b_f32 = logical(k, n, int64_t(b.stride(0)), tb, dnnl_dt::f32);
    p.c_f32 = logical(m, n, int64_t(c.stride(0)), false, dnnl_dt::f32);
    const dnnl::memory::desc a_bf16({m, k}, dnnl_dt::bf16, dnnl::memory::format_tag::ab);
    const dnnl::memory::desc b_bf16({k, n}, dnnl_dt::bf16, dnnl::memory::format_tag::ab);
    p.a_bf16 = dnnl::memory(a_bf16, engine_);
    p.b_bf16 = dnnl::memory(b_bf16, engine_);
    p.round_a = dnnl::reorder(dnnl::reorder::primitive_desc(engine_, p.a_f32, engine_, a_bf16));
    p.round_b = dnnl::reorder(dnnl::reorder::primitive_desc(engine_, p.b_f32, engine_, b_bf16));
    dnnl::primitive_attr attr;
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    p.product = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_bf16, b_bf16, p.c_f32), attr, engine_));
    return p;
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool, float, int64_t, int64_t, int64_t>, Bf16Product> cache_;
};

}  // namespace
#endif

void matmul_bf16(bool trans_a, bool trans_b, V2<const float> a, V2<const float> b, float beta, V2<float> c) {
#ifdef STRATA_HAVE_DNNL
  Bf16Products::instance().run(trans_a, trans_b, a, b, beta, c);
#else
  (void)trans_a, (void)trans_b, (void)a, (void)b, (void)beta, (void)c;
  throw std::logic_error("matmul_bf16: " + bf16_products_unavailable());
#endif
}

}  // namespace strata::kernels
