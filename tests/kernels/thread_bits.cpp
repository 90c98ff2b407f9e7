// thread_bits --threads N: runs every kernel of a step (and the BLAS and oneDNN products
// under them) on fixed inputs with N threads, and prints one line per kernel: its name and a
// hash of its outputs' bits. tests/kernels/thread_bits.sh runs it with 1, 2 and 4 threads
// and requires the same lines: results that do not depend on the thread count
// (kernels/row_reduce.hpp), down to the last bit.
#include <cblas.h>
#include <omp.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstring>
#include <string>

#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/column_sums.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/im2col.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/moe.hpp"
#include "kernels/softmax_causal.hpp"
#include "kernels/sum_squares.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

namespace {

uint64_t fnv(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

struct Hash {
  uint64_t h = 1469598103934665603ull;
  template <class T>
  Hash& add(const Tensor1<T>& v) {
    const auto host = to_host<T>(v);
    h = fnv(h, host.data(), host.size() * sizeof(T));
    return *this;
  }
  Hash& add(double x) {
    h = fnv(h, &x, sizeof x);
    return *this;
  }
};

void print(const char* name, const Hash& hash) { std::printf("%-32s %016llx\n", name, (unsigned long long)hash.h); }

Tensor1<float> rnd(size_t n, uint64_t stream, double scale = 1.0) {
  return to_device(random_vector<float>(n, stream, scale));
}
Tensor1<float> zeros(size_t n) { return Tensor1<float>("zeros", n); }

void products(kernels::ProductPrecision precision, const char* tag) {
  // the GPT's product shapes at C = 768, 512 rows: QKV, its input and weight gradients
  const int64_t n = 512, c = 768;
  auto x = rnd(n * c, 1), w = rnd(c * 3 * c, 2, 0.02), y = zeros(n * 3 * c), dy = rnd(n * 3 * c, 3);
  auto dx = zeros(n * c), dw = rnd(c * 3 * c, 4, 0.01), db = zeros(3 * c);
  kernels::matmul_forward<float>(mat(y, n, 3 * c), mat<const float>(x, n, c), mat<const float>(w, c, 3 * c),
                                 V1<const float>(), precision);
  kernels::matmul_backward<float>(mat(dx, n, c), mat(dw, c, 3 * c), db, mat<const float>(dy, n, 3 * c),
                                  mat<const float>(x, n, c), mat<const float>(w, c, 3 * c), precision);
  print((std::string("matmul_forward ") + tag).c_str(), Hash().add(y));
  print((std::string("matmul_backward ") + tag).c_str(), Hash().add(dx).add(dw).add(db));
  // a batch of small products (attention's per-head blocks), spread over the threads
  auto a = rnd(12 * 64 * 64, 5), b = rnd(12 * 64 * 64, 6), out = zeros(12 * 64 * 64);
  kernels::product_strided_batched<float>(precision, 'N', 'T', 64, 64, 64, a.data(), 64, 64 * 64, b.data(), 64, 64 * 64,
                                          0.f, out.data(), 64, 64 * 64, 12);
  print((std::string("batched_products ") + tag).c_str(), Hash().add(out));
}

// every transpose at small, uneven and long shapes (a mixture's experts get a few dozen
// to a few hundred rows each; OpenBLAS alone sums 64 x 256 over 331 rows otherwise on 2
// threads than on 1: kernels/gemm.hpp): one line per shape, naming a shape that differs
void product_shapes(kernels::ProductPrecision precision, const char* tag) {
  for (const int64_t m : {1, 7, 64, 333})
    for (const int64_t n : {64, 255, 1024})
      for (const int64_t k : {37, 256, 331, 1000}) {
        Hash hash;
        for (const char* ta : {"N", "T"})
          for (const char* tb : {"N", "T"}) {
            auto a = rnd(m * k, 40), b = rnd(k * n, 41), c = rnd(m * n, 42);
            const V2<const float> av = ta[0] == 'T' ? mat<const float>(a, k, m) : mat<const float>(a, m, k);
            const V2<const float> bv = tb[0] == 'T' ? mat<const float>(b, n, k) : mat<const float>(b, k, n);
            kernels::product<float>(precision, ta, tb, av, bv, 1.f, mat(c, m, n));
            hash.add(c);
          }
        print((std::string("product ") + tag + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
               std::to_string(k))
                  .c_str(),
              hash);
      }
}

void attention(kernels::ProductPrecision precision, const char* tag) {
  const int64_t b = 2, t = 256, h = 4, c = 128;
  auto qkv = rnd(b * t * 3 * c, 7), out = zeros(b * t * c), lse = zeros(b * h * t), dout = rnd(b * t * c, 8);
  auto dqkv = zeros(b * t * 3 * c);
  kernels::attention_forward<float>(mat(out, b * t, c), mat(lse, b * h, t), mat<const float>(qkv, b * t, 3 * c), b, t,
                                    h, precision);
  kernels::attention_backward<float>(mat(dqkv, b * t, 3 * c), mat<const float>(qkv, b * t, 3 * c),
                                     mat<const float>(out, b * t, c), mat<const float>(lse, b * h, t),
                                     mat<const float>(dout, b * t, c), b, t, h, precision);
  print((std::string("attention ") + tag).c_str(), Hash().add(out).add(lse).add(dqkv));
}

void row_kernels() {
  const int64_t n = 1000, c = 768;
  auto x = rnd(n * c, 10), w = rnd(c, 11), bias = rnd(c, 12), dout = rnd(n * c, 13);
  auto y = zeros(n * c), mean = zeros(n), rstd = zeros(n), dx = zeros(n * c), dw = zeros(c), db = zeros(c);
  kernels::layernorm_forward<float>(mat(y, n, c), mean, rstd, mat<const float>(x, n, c), w, bias);
  kernels::layernorm_backward<float>(mat(dx, n, c), dw, db, mat<const float>(dout, n, c), mat<const float>(x, n, c), w,
                                     mean, rstd, false);
  print("layernorm", Hash().add(y).add(mean).add(rstd).add(dx).add(dw).add(db));

  auto sums = rnd(4 * c, 14), m = rnd(n * 4 * c, 15);
  kernels::add_column_sums<float>(sums, mat<const float>(m, n, 4 * c));
  print("column_sums", Hash().add(sums));

  auto g = zeros(n * c), dg = zeros(n * c);
  kernels::gelu_forward<float>(g, x);
  kernels::gelu_backward<float>(dg, x, dout);
  print("gelu", Hash().add(g).add(dg));

  print("sum_of_squares", Hash().add(kernels::sum_of_squares<float>(m)));

  auto p = rnd(n * c, 16), mom = rnd(n * c, 17, 0.1), var = rnd(n * c, 18, 0.0), grad = rnd(n * c, 19);
  kernels::AdamWHyper hyper;
  hyper.weight_decay = 0.1;
  kernels::adamw_update<float>(p, mom, var, grad, hyper);
  print("adamw", Hash().add(p).add(mom).add(var));
}

void loss_and_embedding() {
  const int64_t n = 512, v = 5003, c = 256, t_len = 128;
  auto logits = rnd(n * v, 20), losses = zeros(n), lse = zeros(n), dlogits = zeros(n * v);
  Tensor1<int32_t> targets = to_device(hashed_tokens(n, v, 21));
  const double total = kernels::cross_entropy_forward<float>(losses, lse, mat<const float>(logits, n, v), targets);
  kernels::cross_entropy_backward<float>(mat(dlogits, n, v), mat<const float>(logits, n, v), lse, targets, 1.f / n);
  print("cross_entropy", Hash().add(total).add(losses).add(lse).add(dlogits));

  auto wte = rnd(v * c, 22), wpe = rnd(t_len * c, 23), emb = zeros(n * c), dout = rnd(n * c, 24);
  auto dwte = zeros(v * c), dwpe = zeros(t_len * c);
  kernels::embedding_forward<float>(mat(emb, n, c), targets, mat<const float>(wte, v, c),
                                    mat<const float>(wpe, t_len, c), t_len);
  kernels::embedding_backward<float>(mat(dwte, v, c), mat(dwpe, t_len, c), mat<const float>(dout, n, c), targets,
                                     t_len);
  print("embedding", Hash().add(emb).add(dwte).add(dwpe));
}

void moe_and_images() {
  const int64_t n = 300, c = 64, e = 8;
  auto x = rnd(n * c, 30), w = rnd(c * e, 31), probs = zeros(n * e), lse = zeros(n);
  kernels::router_forward<float>(mat(probs, n, e), lse, mat<const float>(x, n, c), mat<const float>(w, c, e));
  print("moe_router", Hash().add(probs).add(lse));

  const int64_t b = 4, h = 14, wd = 14, ch = 8;
  auto img = rnd(b * h * wd * ch, 32), cols = zeros(b * h * wd * 9 * ch), dimg = zeros(b * h * wd * ch);
  kernels::im2col_3x3<float>(mat(cols, b * h * wd, 9 * ch), img.data(), b, h, wd, ch);
  kernels::col2im_3x3_add<float>(dimg.data(), mat<const float>(cols, b * h * wd, 9 * ch), b, h, wd, ch, 0.5f);
  print("im2col_col2im", Hash().add(cols).add(dimg));

  const int64_t heads = 6, t = 64;
  auto att = rnd(heads * t * t, 33), datt = rnd(heads * t * t, 34);
  kernels::softmax_causal_forward<float>(cube(att, heads, t, t), 0.3f);
  kernels::softmax_causal_backward<float>(cube(datt, heads, t, t), cube<const float>(att, heads, t, t), 0.3f);
  print("softmax_causal", Hash().add(att).add(datt));
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  omp_set_num_threads(threads);  // OpenMP's pool: Kokkos', OpenBLAS's and oneDNN's threads
  openblas_set_num_threads(threads);
  Kokkos::InitArguments init;
  init.num_threads = threads;
  init.disable_warnings = true;
  Kokkos::ScopeGuard kokkos(init);
  std::fprintf(stderr, "thread_bits: %d threads (Kokkos %s)\n", Kokkos::DefaultHostExecutionSpace().concurrency(),
               Kokkos::DefaultHostExecutionSpace::name());
  products(Precision::FP32, "fp32");
  product_shapes(Precision::FP32, "fp32");
  attention(Precision::FP32, "fp32");
  row_kernels();
  loss_and_embedding();
  moe_and_images();
  if (kernels::bf16_products_unavailable().empty()) {
    kernels::ProductWorkspace workspace;
    const kernels::ProductPrecision bf16(Precision::BF16, true, &workspace);
    products(bf16, "bf16");
    product_shapes(bf16, "bf16");
    attention(bf16, "bf16");
  } else {
    std::fprintf(stderr, "thread_bits: no bf16 products on this CPU: bf16 left out\n");
  }
  return 0;
}
