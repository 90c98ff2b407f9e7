// Google Benchmark of strata's kernels at the "small" GPT's shapes (C=384, H=6, T=256,
// B=8: 2048 rows), one thread. Reports FLOP/s for the gemms, attention and a whole
// transformer block (forward + backward), and bytes/s for the memory-bound kernels.
//   OPENBLAS_NUM_THREADS=1 build/release/bench/bench_kernels
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>

#include "kernels/attention.hpp"
#include "kernels/attention_reference.hpp"
#include "kernels/column_sums.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/products.hpp"
#include "model/transformer_block.hpp"

using namespace strata;

namespace {
constexpr int64_t kB = 8, kT = 256, kC = 384, kH = 6, kRows = kB * kT;

template <class View>
void fill(const View& v, float x) {
  Kokkos::deep_copy(v, x);
}

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["FLOP/s"] =
      benchmark::Counter(flops_per_iter * double(state.iterations()), benchmark::Counter::kIsRate);
}

// (M x K) @ (K x N), row-major, the products of a GPT layer, as the model runs them
// (kernels/products.hpp): fp32 through BLAS, or bf16 operands with fp32 accumulation
// through oneDNN, the rounding of both operands to bf16 included.
void run_products(benchmark::State& state, Precision precision) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor2<float> a("a", m, k), b("b", k, n), c("c", m, n);
  fill(a, 0.5f);
  fill(b, 0.25f);
  if (precision == Precision::BF16)
    if (const std::string why = kernels::bf16_products_unavailable(); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
  kernels::ProductWorkspace workspace;  // as a model's: primitives and rounded operands kept
  const kernels::ProductPrecision products(precision, true, &workspace);
  for (auto _ : state) {
    kernels::product<float>(products, "N", "N", a, b, 0.0f, c);
    Kokkos::fence();
  }
  set_flops(state, 2.0 * double(m) * double(k) * double(n));
}
void gpt_product_shapes(benchmark::internal::Benchmark* b) {
  for (const auto& [k, n] : {std::pair{kC, 3 * kC}, {kC, kC}, {kC, 4 * kC}, {4 * kC, kC}, {kC, int64_t(8192)}})
    b->Args({kRows, k, n});
  b->Unit(benchmark::kMillisecond);
}
void BM_gemm(benchmark::State& state) { run_products(state, Precision::FP32); }
// The fused attention's score products: one (128 x 512) block of Q K^T per head, over
// `heads` heads in one call (kernels/gemm.hpp spreads them over the threads).
void BM_head_products(benchmark::State& state) {
  const int64_t heads = state.range(0), rows = 128, keys = 512, hs = kC / kH;
  Tensor1<float> q("q", heads * rows * hs), k("k", heads * keys * hs), s("s", heads * rows * keys);
  Kokkos::deep_copy(q, 0.5f);
  Kokkos::deep_copy(k, 0.25f);
  for (auto _ : state)
    kernels::gemm_strided_batched<float>('N', 'T', rows, keys, hs, 1.0f, q.data(), hs, rows * hs, k.data(), hs,
                                         keys * hs, 0.0f, s.data(), keys, rows * keys, heads);
  set_flops(state, 2.0 * double(heads * rows * keys * hs));
}
BENCHMARK(BM_head_products)->Arg(1)->Arg(2)->Arg(6)->Unit(benchmark::kMicrosecond);
void BM_matmul_bf16(benchmark::State& state) { run_products(state, Precision::BF16); }
BENCHMARK(BM_gemm)->Apply(gpt_product_shapes);
BENCHMARK(BM_matmul_bf16)->Apply(gpt_product_shapes);

void BM_layernorm_forward_backward(benchmark::State& state) {
  Tensor2<float> x("x", kRows, kC), y("y", kRows, kC), dx("dx", kRows, kC);
  Tensor1<float> w("w", kC), b("b", kC), dw("dw", kC), db("db", kC), mean("m", kRows), rstd("r", kRows);
  fill(x, 0.3f);
  fill(w, 1.0f);
  for (auto _ : state) {
    kernels::layernorm_forward<float>(y, mean, rstd, x, w, b);
    kernels::layernorm_backward<float>(dx, dw, db, y, x, w, mean, rstd, false);
    Kokkos::fence();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kRows * kC * 4 * 5);
  set_flops(state, double(kRows) * double(kC) * (8.0 + 16.0));  // ~8 flops/element forward, ~16 backward
}
BENCHMARK(BM_layernorm_forward_backward)->Unit(benchmark::kMillisecond);

// A linear's output gradient (rows x 4C) made ready for its bf16 products and its bias
// gradient: 0, the column sums and then the products' rounding of it (oneDNN's reorder,
// as a pass copy is made); 1, both in one pass (add_column_sums_rounding).
void BM_bias_gradient_and_rounding(benchmark::State& state) {
  if (!kernels::RoundedCopy::pays()) {
    state.SkipWithError("bf16 products do not round in a pass of their own here");
    return;
  }
  const int64_t cols = 4 * kC;
  Tensor2<float> dy("dy", kRows, cols);
  Tensor1<float> db("db", cols);
  fill(dy, 0.3f);
  kernels::ProductWorkspace workspace;
  for (auto _ : state) {
    kernels::RoundedCopy copy(workspace, dy.data(), kRows * cols);
    if (state.range(0) == 0) {
      kernels::add_column_sums<float>(db, dy);
      benchmark::DoNotOptimize(workspace.lookup(dy.data(), kRows * cols));
    } else {
      kernels::add_column_sums_rounding<float>(db, dy, copy.fill());
    }
    Kokkos::fence();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kRows * cols * 4);
}
BENCHMARK(BM_bias_gradient_and_rounding)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_gelu_forward_backward(benchmark::State& state) {
  const int64_t n = kRows * 4 * kC;
  Tensor1<float> x("x", n), y("y", n), dx("dx", n);
  fill(x, 0.3f);
  for (auto _ : state) {
    kernels::gelu_forward<float>(y, x);
    kernels::gelu_backward<float>(dx, x, y);
    Kokkos::fence();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 4 * 5);
}
BENCHMARK(BM_gelu_forward_backward)->Unit(benchmark::kMillisecond);

// Causal attention, forward and backward, its products in fp32 or bf16: the fused kernel
// (kernels/attention.hpp) against the stored-probabilities one it replaced
// (kernels/attention_reference.hpp), at T = 256, 1024, 4096 with B = 8, 2, 1. FLOPs count
// the unmasked work only, the same for both: T (T + 1) / 2 query-key pairs per head, 4 hs
// flops each forward (Q K^T, P V) and 8 hs backward (dV, dP, dQ, dK); the fused backward
// remakes Q K^T on top, which is not counted.
template <bool kFused>
void run_attention(benchmark::State& state, Precision type) {
  if (type == Precision::BF16)
    if (const std::string why = kernels::bf16_products_unavailable(); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
  kernels::ProductWorkspace workspace;  // as a model's
  const kernels::ProductPrecision precision(type, true, &workspace);
  const int64_t t = state.range(0), b = state.range(1), rows = b * t;
  Tensor2<float> qkv("qkv", rows, 3 * kC), y("y", rows, kC), dqkv("dqkv", rows, 3 * kC), lse("lse", b * kH, t);
  fill(qkv, 0.01f);
  kernels::AttentionBuffers<float> buf;
  if constexpr (!kFused) buf = kernels::AttentionBuffers<float>(b, t, kH);
  for (auto _ : state) {
    if constexpr (kFused) {
      kernels::attention_forward<float>(y, lse, qkv, b, t, kH, precision);
      kernels::attention_backward<float>(dqkv, qkv, y, lse, y, b, t, kH, precision);
    } else {
      kernels::reference_attention_forward<float>(y, buf, qkv, b, t, kH, precision);
      kernels::reference_attention_backward<float>(dqkv, buf, qkv, y, b, t, kH, precision);
    }
    Kokkos::fence();
  }
  set_flops(state, 12.0 * double(b * kH) * double(t) * double(t + 1) / 2.0 * double(kC / kH));
}
void attention_lengths(benchmark::internal::Benchmark* b) {
  for (const auto& [t, batch] : {std::pair<int64_t, int64_t>{256, 8}, {1024, 2}, {4096, 1}}) b->Args({t, batch});
  b->ArgNames({"T", "B"})->Unit(benchmark::kMillisecond);
}
void BM_attention_fused(benchmark::State& state) { run_attention<true>(state, Precision::FP32); }
void BM_attention_fused_bf16(benchmark::State& state) { run_attention<true>(state, Precision::BF16); }
void BM_attention_stored(benchmark::State& state) { run_attention<false>(state, Precision::FP32); }
void BM_attention_stored_bf16(benchmark::State& state) { run_attention<false>(state, Precision::BF16); }
BENCHMARK(BM_attention_fused)->Apply(attention_lengths);
BENCHMARK(BM_attention_stored)->Apply(attention_lengths);
BENCHMARK(BM_attention_fused_bf16)->Apply(attention_lengths);
BENCHMARK(BM_attention_stored_bf16)->Apply(attention_lengths);

// One transformer block, forward + backward: 6 * 12 C^2 per token for the linears plus
// 12 T C for attention.
void BM_block_forward_backward(benchmark::State& state) {
  ParamStore<float> store;
  const TensorParallel serial;
  const ContextParallel whole_sequence;
  TransformerBlock<float> block(store, serial, whole_sequence, Precision::FP32, false, Recompute::None, 0, 6, kC, kH,
                                0.02);
  store.allocate(1);
  TransformerCache<float> cache;
  TransformerGradScratch<float> scratch;
  TransformerRecomputed<float> recomputed;  // unused: no recomputation
  const BlockContext ctx{kB, kT};
  Tensor2<float> x("x", kRows, kC), dres("dres", kRows, kC);
  fill(x, 0.1f);
  for (auto _ : state) {
    block.forward(ctx, x, cache, recomputed, scratch);
    Kokkos::deep_copy(dres, 0.01f);
    block.backward_input(ctx, dres, cache, scratch, recomputed, 1.0f);
    block.backward_weight(cache, recomputed, scratch);
    Kokkos::fence();
  }
  set_flops(state, double(kRows) * (6.0 * 12.0 * kC * kC + 12.0 * kT * kC));
}
BENCHMARK(BM_block_forward_backward)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
