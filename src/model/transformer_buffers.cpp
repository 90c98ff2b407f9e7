#include "model/transformer_buffers.hpp"

#include "kernels/products.hpp"

namespace strata {

bool keeps_bf16_operands(Precision precision, bool round_once, const TensorParallel& tp) {
  return precision == Precision::BF16 && round_once && kernels::RoundedCopy::pays() && tp.traits().whole_activations;
}

template <class T>
void TransformerCache<T>::ensure(const BlockContext& ctx, const BlockWidths& w, bool keep_recomputable) {
  if (int64_t(qkv.extent(0)) == ctx.rows() && int64_t(out.extent(0)) == ctx.rows() / w.row_split &&
      (fch_gelu.rows() == ctx.rows()) == keep_recomputable && (ln1.rounded.extent(0) > 0) == w.bf16_operands)
    return;
  buffers(ctx, w, keep_recomputable, AllocateEach{});
}

template <class T>
int64_t TransformerCache<T>::bytes_for(const BlockContext& ctx, const BlockWidths& w, bool keep_recomputable) {
  CountBytes count;
  TransformerCache<T>().buffers(ctx, w, keep_recomputable, count);
  return count.bytes;
}

template <class T>
void TransformerRecomputed<T>::ensure(const BlockContext& ctx, const BlockWidths& w) {
  if (fch_gelu.rows() != ctx.rows() || (fch_gelu.rounded.extent(0) > 0) != w.bf16_operands)
    buffers(ctx, w, AllocateEach{});
}

template <class T>
int64_t TransformerRecomputed<T>::bytes_for(const BlockContext& ctx, const BlockWidths& w) {
  CountBytes count;
  TransformerRecomputed<T>().buffers(ctx, w, count);
  return count.bytes;
}

template <class T>
void TransformerGradScratch<T>::ensure(int64_t rows, const BlockWidths& w) {
  if (int64_t(dqkv.extent(0)) != rows || (this->rows.extent(0) > 0) != (w.row_split > 1) ||
      int64_t(gathered0.extent(0)) != w.weight_block) {
    buffers(rows, w, AllocateEach{});
    transfers.attach(gathered0, gathered1, grad_block0, grad_block1);
  }
}

template <class T>
int64_t TransformerGradScratch<T>::bytes_for(int64_t rows, const BlockWidths& w) {
  CountBytes count;
  TransformerGradScratch<T>().buffers(rows, w, count);
  return count.bytes;
}

template struct TransformerCache<float>;
template struct TransformerCache<double>;
template struct TransformerRecomputed<float>;
template struct TransformerRecomputed<double>;
template struct TransformerGradScratch<float>;
template struct TransformerGradScratch<double>;

}  // namespace strata
