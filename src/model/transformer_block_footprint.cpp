// What the planner reads of a transformer block (model/transformer_block.hpp): the bytes
// each of its collectives sends, in the order its forward and backward send them, and the
// largest stack of rounded operands its bf16 products need at once.
#include <algorithm>
#include <type_traits>

#include "kernels/products.hpp"
#include "model/transformer_block.hpp"
#include "parallel/ring_attention.hpp"
#include "parallel/all_to_all_attention.hpp"
#include "parallel/tp_traffic.hpp"

namespace strata {

template <class T>
int64_t TransformerBlock<T>::product_stack_elements(int64_t rows) const {
  if (!std::is_same_v<T, float> || precision_.type != Precision::BF16 || !precision_.round_once ||
      !kernels::RoundedCopy::pays())
    return 0;
  const auto n = [&](int64_t cols) { return kernels::ProductWorkspace::stack_elements(rows * cols); };
  const int64_t c = w_.c, a = w_.a, f = w_.f;
  // attention's copies of Q|K|V and of the output gradient (backward), and the ring's
  // visiting key-value block; its own products read copies and bf16-written blocks only
  int64_t most = n(3 * a) + n(a) + (cp_.active() && !cp_.all_to_all ? n(2 * a) : 0);
  if (tp_.traits().multiplies_moved_blocks) {
    // SUMMA multiplies broadcast blocks, and 3D with a depth group the blocks it gathered,
    // both operands rounded: forward x W, backward dy W^T and x^T dy, for each linear
    // (c -> 3a, a -> c, c -> f, f -> c)
    const auto linear = [&](int64_t in, int64_t out) {
      const int64_t w = kernels::ProductWorkspace::stack_elements(in * out);
      return std::max({n(in) + w, n(out) + w, n(in) + n(out)});
    };
    most = std::max({most, linear(c, 3 * a), linear(a, c)});
    if (!moe_) most = std::max({most, linear(c, f), linear(f, c)});
    return most;
  }
  // 1D (and 3D without a depth group, whose blocks are the parameters): the weights are
  // read from the parameters' copy; the layer norms' and GELU's outputs are bf16 already
  // where the block keeps them so (bits), else rounded here
  const int64_t x = w_.bf16_operands ? 0 : n(c);       // ln1 or ln2 as a product's operand
  most = std::max({most, n(a) + n(c), x + n(3 * a)});  // proj's dW = atty^T dy; qkv's dW = ln1^T dqkv
  if (!moe_) {
    const int64_t h = w_.bf16_operands ? 0 : n(f);  // the GELU's output
    most = std::max({most, h + n(c), x + n(f)});    // fc_proj's dW = h^T dy; fc's dW = ln2^T dfch
  }
  return most;
}

template <class T>
void TransformerBlock<T>::traffic(const BlockContext& ctx, Traffic& out) const {
  forward_traffic(ctx, out);
  const auto& tp = tp_;
  const int64_t n = ctx.rows(), c = w_.c, a = w_.a, f = w_.f, e = sizeof(T);
  // backward, in the order of backward()
  if (moe_) {
    moe_->traffic(ctx, out, false);
  } else {
    tp_linear_out_backward_traffic(out, tp, n, f, c, e);
    tp_linear_in_backward_traffic(out, tp, n, c, f, e);
  }
  tp_layernorm_backward_traffic(out, tp, n, c, e);
  tp_linear_out_backward_traffic(out, tp, n, a, c, e);
  if (cp_.all_to_all)
    all_to_all_attention_backward_traffic(out, cp_, n, a, e);
  else
    ring_attention_backward_traffic(out, cp_, n, a, e);
  tp_linear_in_backward_traffic(out, tp, n, c, 3 * a, e);
  tp_layernorm_backward_traffic(out, tp, n, c, e);
  // backward_weight: the layer norms' outputs gathered again (sequence parallelism; a
  // mixture's ln2 is not: its gradients were made in the input half)
  if (!moe_) tp_gather_rows_traffic(out, tp, n, c, e);
  tp_gather_rows_traffic(out, tp, n, c, e);
}

template <class T>
void TransformerBlock<T>::forward_traffic(const BlockContext& ctx, Traffic& out) const {
  const auto& tp = tp_;
  const int64_t n = ctx.rows(), c = w_.c, a = w_.a, f = w_.f, e = sizeof(T);
  // in the order of forward()
  tp_layernorm_forward_traffic(out, tp, n, e);
  tp_linear_in_forward_traffic(out, tp, n, c, 3 * a, e);
  if (cp_.all_to_all)
    all_to_all_attention_forward_traffic(out, cp_, n, a, e);
  else
    ring_attention_forward_traffic(out, cp_, n, a, e);
  tp_linear_out_forward_traffic(out, tp, n, a, c, e);
  tp_layernorm_forward_traffic(out, tp, n, e);
  if (moe_) {
    moe_->traffic(ctx, out, true);
    return;
  }
  tp_linear_in_forward_traffic(out, tp, n, c, f, e);
  tp_linear_out_forward_traffic(out, tp, n, f, c, e);
}

#ifndef STRATA_TRANSFORMER_BLOCK_INSTANTIATED  // (not in one unit after the class's own file: see there)
#define STRATA_BLOCK_FOOTPRINT(T)                                                          \
  template int64_t TransformerBlock<T>::product_stack_elements(int64_t) const;             \
  template void TransformerBlock<T>::traffic(const BlockContext&, Traffic&) const;         \
  template void TransformerBlock<T>::forward_traffic(const BlockContext&, Traffic&) const;
STRATA_BLOCK_FOOTPRINT(float)
STRATA_BLOCK_FOOTPRINT(double)
#undef STRATA_BLOCK_FOOTPRINT
#endif

}  // namespace strata
