#pragma once
// Final layernorm, the LM head tied to the token embedding (logits = lnf(x) wte^T), and
// the cross-entropy loss against the next tokens. Under a tensor split the logits are
// split by vocabulary (parallel/vocab_parallel.hpp). Under sequence parallelism its input
// is this rank's rows: the final layer norm runs on them, and its output is gathered for
// the logits, which are over every row.
#include "comm/traffic.hpp"
#include "kernels/products.hpp"
#include "model/block_context.hpp"
#include "parallel/tensor_parallel.hpp"
#include "state/param_store.hpp"
#include "state/unit_hooks.hpp"

namespace strata {

// rows: the head's rows (BT); split: how many ways the input's rows are split (sequence
// parallelism's t, else 1), so the layer norm runs on rows / split of them.
template <class T>
struct LMHeadCache {
  V2<const T> x_in;               // (BT / split, C'), owned by the caller
  Tensor2<T> lnf;                 // (BT, C'), every row (gathered under sequence parallelism)
  Tensor2<T> lnf_local;           // (BT / split, C') under sequence parallelism: this rank's rows of it
  Tensor1<T> lnf_mean, lnf_rstd;  // (BT / split)
  Tensor2<T> logits;              // (BT, V'), this rank's vocabulary columns; overwritten by dlogits in the backward
  Tensor1<T> lse, losses;         // (BT)
  V1<const int32_t> targets;
  void ensure(int64_t rows, int64_t split, int64_t c, int64_t v) {
    if (int64_t(lnf.extent(0)) != rows || int64_t(lnf_mean.extent(0)) != rows / split)
      buffers(rows, split, c, v, AllocateEach{});
  }
  int64_t bytes() const { return view_bytes(lnf, lnf_local, lnf_mean, lnf_rstd, logits, lse, losses); }
  static int64_t bytes_for(int64_t rows, int64_t split, int64_t c, int64_t v) {  // bytes() after ensure(...)
    CountBytes count;
    LMHeadCache().buffers(rows, split, c, v, count);
    return count.bytes;
  }
  // Every buffer with its shape (core/tensor.hpp: AllocateEach, CountBytes).
  template <class Each>
  void buffers(int64_t rows, int64_t split, int64_t c, int64_t v, Each&& each) {
    each(lnf, "lnf", rows, c);
    each(lnf_local, "lnf_local", split > 1 ? rows / split : 0, c);
    each(lnf_mean, "lnf_mean", rows / split);
    each(lnf_rstd, "lnf_rstd", rows / split);
    each(logits, "logits", rows, v);
    each(lse, "lse", rows);
    each(losses, "losses", rows);
  }
};

template <class T>
class LMHead {
 public:
  // held: this rank is on the last pipeline stage (else it only declares lnf).
  // vocab: the real vocabulary; wte's rows past it (model.padded_vocab_size) get logits of
  // -inf, so the softmax, the loss and sampling leave them out and they get no gradient.
  LMHead(ParamStore<T>& store, const TensorParallel& tp, kernels::ProductPrecision precision, int wte_index, int64_t c,
         int64_t vocab, bool held = true);
  // x (BT, C'; under sequence parallelism this rank's BT/t rows), targets (BT) of this
  // rank's rows -> sum of those rows' token losses.
  // units (ZeRO-2/3's finer units; no 2D or 3D split, no sequence parallelism): lnf read,
  // then wte chunk by chunk of vocabulary rows, each chunk's logits made in `chunk` (rows,
  // units->chunk_rows) and copied into the cache's.
  double forward(const BlockContext& ctx, V2<const T> x, V1<const int32_t> targets, LMHeadCache<T>& cache,
                 const UnitHooks* units = nullptr, V2<T> chunk = {}) const;
  // The backward in two halves (zero-bubble schedules run them apart). backward_input:
  // dloss_scale = dL/d(loss of each token); writes dL/dx into dx (x's shape) through dlnf
  // (x's shape, scratch; under sequence parallelism reduce-scattered through rows, (BT,
  // C)), turns the cached logits into dlogits and accumulates lnf's gradients.
  // backward_weight: the tied embedding's gradient dlogits^T lnf(x).
  void backward_input(T dloss_scale, V2<T> dx, V2<T> dlnf, LMHeadCache<T>& cache, V2<T> rows = {}) const;
  void backward_weight(LMHeadCache<T>& cache) const;
  // Both halves at once, the same results: in bf16 the dlogits, which both halves'
  // products read, are rounded once (a copy of 2 bytes per logit while it runs) rather
  // than once by each, and the weight half then reads them transposed where they lie
  // (a transposing rounding of B T x V values cost more than the product itself).
  // With units (as forward's): wte read chunk by chunk, last first, each chunk's gradient
  // told final (unit k: chunk k) as it is made, then lnf read and its gradients made.
  void backward(T dloss_scale, V2<T> dx, V2<T> dlnf, LMHeadCache<T>& cache, V2<T> rows = {},
                const UnitHooks* units = nullptr, V2<T> chunk = {}) const;
  // What one forward and backward on ctx sends (comm/traffic.hpp).
  void traffic(const BlockContext& ctx, Traffic& out) const;
  // As TransformerBlock::product_stack_elements: the dlogits' pass copy and the head's
  // products' rounded operands, on `rows` rows.
  int64_t product_stack_elements(int64_t rows) const;

 private:
  // backward_input after the cross-entropy: dlnf = dlogits wte, then the final layer norm's
  // backward into dx (the dlogits where the cache's logits were, or in their bf16 copy)
  void backward_from_dlogits(V2<T> dx, V2<T> dlnf, LMHeadCache<T>& cache, V2<T> rows) const;
  void backward_chunks(T dloss_scale, V2<T> dx, V2<T> dlnf, LMHeadCache<T>& cache, const UnitHooks& units,
                       V2<T> chunk) const;
  ParamStore<T>& store_;
  const TensorParallel& tp_;
  kernels::ProductPrecision precision_;  // of the products (model.precision, model.bf16_round_once)
  int wte_, lnf_w_, lnf_b_;
  int64_t c_, vocab_;
};

}  // namespace strata
