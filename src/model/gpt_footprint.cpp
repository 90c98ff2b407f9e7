// What the planner reads of a GPT stage (model/gpt.hpp): the traffic of a micro-batch, the
// bytes of its caches and workspace, and its FLOPs.
#include "model/gpt.hpp"

namespace strata {

template <class T>
void GPT<T>::micro_batch_traffic(const BlockContext& ctx, Traffic& out, int chunk) const {
  const BlockContext local = local_context(ctx);
  if (placement_.model_first(chunk)) embedding_->traffic(local, out);
  for (int l = placement_.chunk(chunk).first; l < placement_.chunk(chunk).second; ++l) {
    blocks_[l].traffic(local, out);
    if (recompute_ == Recompute::Full) blocks_[l].forward_traffic(local, out);  // run again in the backward
  }
  if (!placement_.model_last(chunk)) return;
  head_->traffic(local, out);
  tp_.loss_sum_traffic(out);
}

template <class T>
int64_t GPT<T>::workspace_bytes_for(const BlockContext& ctx) const {
  const int first = placement_.chunk(0).first;
  const BlockContext local = local_context(ctx);
  // the backward's scratch, one for every micro-batch: blocks and the head's input gradient
  int64_t b = TransformerGradScratch<T>::bytes_for(local.rows(), blocks_[first].widths());
  if (cp_.active() && placement_.held_layers() > 0)
    b += ContextWorkspace<T>::bytes_for(cp_.all_to_all, local.batch * local.seq_len, blocks_[first].widths().a);
  if (fine_ && placement_.last())
    b += local.rows() * chunk_rows_ * int64_t(sizeof(T));  // the head's chunk of logits (vocab_chunk)
  // the bf16 products' stack (ParamStore::product_workspace): the most any layer holds
  int64_t stack = placement_.last() ? head_->product_stack_elements(local.rows()) : 0;
  for (int k = 0; k < placement_.chunk_count(); ++k)
    for (int l = placement_.chunk(k).first; l < placement_.chunk(k).second; ++l)
      stack = std::max(stack, blocks_[l].product_stack_elements(local.rows()));
  return b + stack * int64_t(sizeof(uint16_t));
}

template <class T>
StageMemory GPT<T>::memory_for(const BlockContext& ctx, int chunk, bool loss_cache_shared) const {
  const bool shared_head = loss_cache_shared && placement_.last();
  StageMemory m;
  m.cache = cache_bytes(ctx, chunk, shared_head);
  m.shared_cache = shared_head ? head_cache_bytes(ctx) : 0;
  m.workspace = workspace_bytes_for(ctx);
  return m;
}

template <class T>
int64_t GPT<T>::cache_bytes(const BlockContext& ctx, int chunk, bool shared_head) const {
  const BlockContext local = local_context(ctx);
  const int64_t c = boundary_shape(ctx).second;
  const int64_t stream = boundary_shape(ctx).first;  // the residual stream's rows (sequence parallelism: rows / t)
  const auto [begin, end] = placement_.chunk(chunk);
  int64_t b = stream * c * int64_t(sizeof(T));              // dres
  const int64_t sequence_rows = ctx.batch * local.seq_len;  // the replica's rows on this context rank
  const int64_t scratch_rows = tp_.traits().whole_activations ? 0 : sequence_rows;
  if (placement_.model_first(chunk))
    b += EmbeddingCache<T>::bytes_for(stream, c, scratch_rows, cp_.active() ? local.seq_len : 0);
  if (cp_.active())  // the local rows' token ids and targets
    b += sequence_rows * int64_t(sizeof(int32_t)) *
         ((placement_.model_first(chunk) ? 1 : 0) + (placement_.model_last(chunk) ? 1 : 0));
  const int layers = end - begin;
  const auto mixture_bytes = [&](int l) {
    return blocks_[l].mixture() ? blocks_[l].mixture()->cache_bytes_for(local) : 0;
  };
  switch (recompute_) {
    case Recompute::None:
      for (int l = begin; l < end; ++l)
        b += TransformerCache<T>::bytes_for(local, blocks_[l].widths()) + mixture_bytes(l);
      break;
    case Recompute::Selective:
      if (layers > 0) b += TransformerRecomputed<T>::bytes_for(local, blocks_[begin].widths());
      for (int l = begin; l < end; ++l)
        b += TransformerCache<T>::bytes_for(local, blocks_[l].widths(), false) + mixture_bytes(l);
      break;
    case Recompute::Full:  // one block's cache, every block's input and the stage output
      if (layers > 0) {
        int64_t mixture = 0;  // the shared cache holds a mixture's routing and rows once one has run in it
        for (int l = begin; l < end; ++l) mixture = std::max(mixture, mixture_bytes(l));
        b += TransformerCache<T>::bytes_for(local, blocks_[begin].widths()) + mixture +
             (layers + 1) * stream * c * int64_t(sizeof(T));
      }
      break;
  }
  if (placement_.model_last(chunk) && !shared_head) b += head_cache_bytes(ctx);
  return b;
}

template <class T>
int64_t GPT<T>::head_cache_bytes(const BlockContext& ctx) const {
  return LMHeadCache<T>::bytes_for(local_context(ctx).rows(), tp_.row_split(), boundary_shape(ctx).second,
                                   store_.infos()[size_t(embedding_->wte_index())].count[0]);
}

// A parameter's share of the work a token does: an expert's, top_k of every E.
namespace {
double active_share(const ParamInfo& p, const ModelConfig& cfg) {
  return p.expert ? double(cfg.moe_top_k) / double(cfg.moe_experts) : 1.0;
}
}  // namespace

template <class T>
double GPT<T>::stage_flops(const BlockContext& ctx) const {
  double n = 0;
  for (const auto& p : store_.infos()) {
    if (p.numel == 0 || p.name == "wpe") continue;        // another stage's, or a lookup
    if (p.name == "wte" && !placement_.last()) continue;  // a lookup here; the head's product is counted there
    n += double(p.global_numel) * active_share(p, cfg_);
  }
  const double layers = placement_.held_layers();
  const double per_token = 6.0 * n + 12.0 * layers * double(cfg_.seq_len) * double(cfg_.n_embd);
  return per_token * double(ctx.rows()) / double(tp_.size() * cp_.size);
}

template <class T>
double GPT<T>::attention_model_flops(const BlockContext& ctx) const {
  const double per_token = 12.0 * double(placement_.held_layers()) * double(cfg_.seq_len) * double(cfg_.n_embd);
  return per_token * double(ctx.rows()) / double(tp_.size() * cp_.size);
}

template <class T>
double GPT<T>::attention_kernel_flops(const BlockContext& ctx) const {
  const double per_token = 6.0 * double(placement_.held_layers()) * double(ctx.seq_len + 1) * double(cfg_.n_embd);
  return per_token * double(ctx.rows()) / double(tp_.size() * cp_.size);  // the zigzag split shares it evenly
}

template <class T>
double GPT<T>::flops_per_token() const {
  double n = -double(cfg_.seq_len * cfg_.n_embd);  // the position table is a lookup
  for (const auto& p : store_.infos()) n += double(p.global_numel) * active_share(p, cfg_);
  return 6.0 * n + 12.0 * double(cfg_.n_layer) * double(cfg_.seq_len) * double(cfg_.n_embd);
}

#ifndef STRATA_GPT_INSTANTIATED  // (not in one unit after the class's own file: see there)
#define STRATA_GPT_FOOTPRINT(T)                                                        \
  template void GPT<T>::micro_batch_traffic(const BlockContext&, Traffic&, int) const; \
  template int64_t GPT<T>::workspace_bytes_for(const BlockContext&) const;             \
  template StageMemory GPT<T>::memory_for(const BlockContext&, int, bool) const;       \
  template int64_t GPT<T>::cache_bytes(const BlockContext&, int, bool) const;          \
  template int64_t GPT<T>::head_cache_bytes(const BlockContext&) const;                \
  template double GPT<T>::stage_flops(const BlockContext&) const;                      \
  template double GPT<T>::attention_model_flops(const BlockContext&) const;            \
  template double GPT<T>::attention_kernel_flops(const BlockContext&) const;           \
  template double GPT<T>::flops_per_token() const;
STRATA_GPT_FOOTPRINT(float)
STRATA_GPT_FOOTPRINT(double)
#undef STRATA_GPT_FOOTPRINT
#endif

}  // namespace strata
