#include "model/gpt.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>


namespace strata {

template <class T>
GPT<T>::GPT(const ModelConfig& cfg, uint64_t seed, const TensorParallel& tp, StagePlacement placement,
            Recompute recompute, bool allocate, const ContextParallel& cp, const ExpertParallel& ep)
    : cfg_(cfg), tp_(tp), cp_(cp), recompute_(recompute),
      placement_(placement.stages == 1 && !placement.holds_layer_steps()
                     ? StagePlacement::balanced(int(cfg.n_layer), 1, 0)
                     : placement) {
  for (int k = 0; k < placement_.chunk_count(); ++k)
    if (placement_.chunk(k).second <= placement_.chunk(k).first &&
        !(placement_.holds_layer_steps() && k != placement_.steps_chunk()))  // a layer-step buffer may be empty
      throw std::logic_error("pipeline stage " + std::to_string(placement_.stage) + " of " +
                             std::to_string(placement_.stages) + " holds no layer in its chunk " + std::to_string(k) +
                             " (n_layer " + std::to_string(cfg.n_layer) + ")");
  const int64_t c = cfg.n_embd;
  embedding_ = std::make_unique<EmbeddingBlock<T>>(store_, tp_, cp_, placement_, cfg.vocab_size, cfg.vocab_rows(),
                                                   cfg.seq_len, c, cfg.init_std);
  blocks_.reserve(cfg.n_layer);
  // 3D: depth rank z holds sequences [z b, (z + 1) b) of its replica's micro-batch, which
  // the capacity's order reads as one more split of the data group
  const BatchBlock block = tp_.traits().batch;
  const MixtureSetup mixture{
      cfg, ep, TokenPlace{ep.data_rank * block.parts + block.index, ep.data_size * block.parts, cp_.rank, cp_.size}};
  for (int l = 0; l < cfg.n_layer; ++l)
    blocks_.emplace_back(store_, tp_, cp_, cfg.precision, cfg.bf16_round_once, recompute_, l, cfg.n_layer, c,
                         cfg.n_head, cfg.init_std, placement_.holds_layer(l), cfg.moe_block(l) ? &mixture : nullptr,
                         &context_workspace_);
  head_ = std::make_unique<LMHead<T>>(store_, tp_, store_.product_precision(cfg.precision, cfg.bf16_round_once),
                                      embedding_->wte_index(), c, cfg.vocab_size, placement_.last());
  if (allocate) store_.allocate(seed);
  act_.blocks.resize(cfg.n_layer);
  // Each block declared its parameters in one go, so they are contiguous in the buffer.
  for (int l = 0; l < cfg.n_layer; ++l)
    block_first_.push_back(store_.index("blocks." + std::to_string(l) + ".ln1.weight"));
  lnf_first_ = store_.index("lnf.weight");
}

template <class T>
GPT<T>::~GPT() = default;

template <class T>
int GPT<T>::held_block() const {
  for (int k = 0; k < placement_.chunk_count(); ++k)
    if (placement_.chunk(k).second > placement_.chunk(k).first) return placement_.chunk(k).first;
  throw std::logic_error("GPT: the stage holds no block");
}

template <class T>
void GPT<T>::block_forward(int l, const BlockContext& ctx, V2<const T> x, TransformerCache<T>& cache, T scale) {
  aux_loss_ += blocks_[size_t(l)].forward(ctx, x, cache, act_.recomputed, grad_scratch_, false, nullptr, scale);
}

template <class T>
void GPT<T>::block_backward(int l, const BlockContext& ctx, V2<T> dres, TransformerCache<T>& cache, bool weights) {
  const auto& block = blocks_[size_t(l)];
  if (!weights) {
    block.backward_input(ctx, dres, cache, grad_scratch_, act_.recomputed, T(0));
    return;
  }
  const auto [begin, end] = block_range(l);  // set, not added to: the passes without weights left the norms' there
  Kokkos::deep_copy(Kokkos::subview(store_.grads(), std::make_pair(begin, end)), T(0));
  block.backward(ctx, dres, cache, grad_scratch_, act_.recomputed, T(0));
}

template <class T>
std::pair<int64_t, int64_t> GPT<T>::embedding_range() const {
  return {0, store_.infos()[size_t(block_first_.front())].offset};
}

template <class T>
template <class Ready>
void GPT<T>::ready_embedding(const Ready& ready) const {
  const auto [begin, end] = embedding_range();
  const int64_t wte_end = std::min(end, wte_end_offset());
  ready(std::make_pair(wte_end, end));  // from the end of the buffer towards its start, as every range
  ready(std::make_pair(begin, wte_end));
}

template <class T>
int64_t GPT<T>::wte_end_offset() const {
  const auto& wte = store_.infos()[size_t(embedding_->wte_index())];
  return wte.offset + wte.numel;
}

template <class T>
std::pair<int64_t, int64_t> GPT<T>::block_range(int l) const {
  const auto& infos = store_.infos();
  const int next = l + 1 < int(block_first_.size()) ? block_first_[size_t(l) + 1] : lnf_first_;
  return {infos[size_t(block_first_[size_t(l)])].offset, infos[size_t(next)].offset};
}

template <class T>
std::pair<int64_t, int64_t> GPT<T>::lnf_range() const {
  return {store_.infos()[size_t(lnf_first_)].offset, store_.expert_begin()};
}

template <class T>
void GPT<T>::use_fine_units(bool sharded, int shards) {
  fine_ = sharded && tp_.traits().whole_activations;
  // 4 C rows (the size of the largest linear's unit), a multiple of the shards so that no
  // unit's padding falls inside wte
  chunk_rows_ =
      fine_ ? (4 * store_.infos()[size_t(embedding_->wte_index())].count[1] + shards - 1) / shards * shards : 0;
}

template <class T>
std::vector<std::pair<int64_t, int64_t>> GPT<T>::wte_chunk_ranges() const {
  const auto& wte = store_.infos()[size_t(embedding_->wte_index())];
  std::vector<std::pair<int64_t, int64_t>> out;
  if (wte.numel == 0) return out;
  const int64_t cols = wte.numel / wte.count[0];
  for (const auto& [r0, r1] : vocab_chunks(wte.count[0], chunk_rows_))
    out.emplace_back(wte.offset + r0 * cols, wte.offset + r1 * cols);
  return out;
}

template <class T>
std::vector<std::pair<int64_t, int64_t>> GPT<T>::block_unit_ranges(int l) const {
  const std::vector<int64_t> starts = blocks_[size_t(l)].unit_starts();
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t u = 0; u < starts.size(); ++u)
    out.emplace_back(starts[u], u + 1 < starts.size() ? starts[u + 1] : block_range(l).second);
  return out;
}

template <class T>
V2<T> GPT<T>::vocab_chunk(int64_t rows) {
  ensure_extents(vocab_chunk_, "head.vocab_chunk", rows, chunk_rows_);
  return vocab_chunk_;
}

// The chunk's pieces: the embedding (its backward reads no parameter), each block (with
// the experts' region where its MLP is a mixture), the head (the final norm and the tied
// wte); with the finer units, each unit a step (a recomputed block's again in the backward).
template <class T>
PassPieces GPT<T>::pass_pieces(int chunk) const {
  const auto each_a_step = [](const std::vector<FlatRange>& ranges) {
    ParamSteps steps;
    for (const auto& r : ranges) steps.push_back({r});
    return steps;
  };
  const FlatRange experts{store_.expert_begin(), store_.numel()};
  const auto chunks = fine_ ? wte_chunk_ranges() : std::vector<FlatRange>{};
  PassPieces pieces;
  if (placement_.model_first(chunk)) {
    PassPiece& e = pieces.emplace_back();
    e.backward_reads = false;
    e.ready = chunks;
    if (fine_)
      e.ready.push_back(wpe_range());
    else
      ready_embedding([&](const FlatRange& r) { e.ready.push_back(r); });
    e.steps = fine_ ? each_a_step(e.ready) : ParamSteps{{embedding_range()}};
  }
  const auto [begin, end] = placement_.chunk(chunk);
  for (int l = begin; l < end; ++l) {
    PassPiece& b = pieces.emplace_back();
    b.ready = fine_ ? block_unit_ranges(l) : std::vector<FlatRange>{block_range(l)};
    b.steps = each_a_step(b.ready);
    if (blocks_[size_t(l)].mixture()) b.steps[fine_ ? 1 : 0].push_back(experts);  // read with proj + ln2
    b.backward_repeats = fine_ && recompute_ == Recompute::Full;
    std::reverse(b.ready.begin(), b.ready.end());
  }
  if (placement_.model_last(chunk)) {
    PassPiece& h = pieces.emplace_back();
    const auto& wte = store_.infos()[size_t(embedding_->wte_index())];
    h.ready = {lnf_range()};  // the tied wte is final after the embedding's backward
    h.steps = {{lnf_range(), {wte.offset, wte.offset + wte.numel}}};
    if (fine_) {
      h.ready.insert(h.ready.end(), chunks.begin(), chunks.end());
      h.steps = each_a_step(h.ready);
      std::reverse(h.ready.begin(), h.ready.end());
    }
  }
  return pieces;
}

template <class T>
ParamSteps GPT<T>::param_steps(int chunk, bool backward) const {
  const PassPieces pieces = pass_pieces(chunk);
  return backward ? backward_steps(pieces) : forward_steps(pieces);
}

template <class T>
PassParams<T> GPT<T>::pass_params(int chunk, bool backward) {
  return PassParams<T>(store_.zero(), store_.zero().params_sharded() ? param_steps(chunk, backward) : ParamSteps{},
                       fine_, chunk_rows_);
}

template <class T>
BlockContext GPT<T>::local_context(const BlockContext& replica) const {
  BlockContext local = replica;
  local.seq_len = replica.seq_len / cp_.size;
  local.batch = replica.batch / tp_.traits().batch.parts;
  return local;
}

template <class T>
std::pair<int64_t, int64_t> GPT<T>::local_rows(const BlockContext& replica) const {
  const int64_t rows = local_context(replica).rows();
  const int64_t begin = tp_.traits().batch.index * rows;
  return {begin, begin + rows};
}

template <class T>
double GPT<T>::forward(const BlockContext& ctx, V1<const int32_t> tokens, V1<const int32_t> targets) {
  SampleBatch<T> batch;
  batch.samples = ctx.batch;
  batch.tokens = tokens;
  batch.targets = targets;
  return forward(ctx, batch, {}, act_);
}

template <class T>
void GPT<T>::backward(const BlockContext& ctx, T dloss_scale, const GradReadyFn& on_ready) {
  backward(ctx, dloss_scale, {}, act_, on_ready);
}

template <class T>
double GPT<T>::forward(const BlockContext& ctx, const SampleBatch<T>& batch, V2<const T> input, StageCache& cache) {
  auto& act = as_acts(cache);
  V1<const int32_t> tokens = batch.tokens, targets = batch.targets;
  const BlockContext local = local_context(ctx);
  if (cp_.active()) {  // this rank's chunks of the replica's sequences
    const auto local_rows_of = [&](Tensor1<int32_t>& mine, V1<const int32_t>& all) {
      ensure_extents(mine, "context_rows", ctx.batch * local.seq_len);
      gather_local_rows<int32_t>(cp_, mine, all, ctx.batch, ctx.seq_len);
      all = mine;
    };
    if (placement_.model_first(act.chunk)) local_rows_of(act.tokens, tokens);
    if (placement_.model_last(act.chunk)) local_rows_of(act.targets, targets);
  }
  const auto [begin, end] = placement_.chunk(act.chunk);
  if (act.blocks.size() != blocks_.size()) act.blocks.resize(blocks_.size());
  act.input = input;
  V2<const T> x = input;
  PassParams<T> params = pass_params(act.chunk, false);  // ZeRO-3's gathers
  const UnitHooks* units = params.units();               // finer units: the layers take the steps
  if (placement_.model_first(act.chunk)) {
    params.layer();
    embedding_->forward(local, tokens, act.emb, units);
    x = act.emb.out;
  }
  const bool full = recompute_ == Recompute::Full;
  if (full && act.block_inputs.size() != blocks_.size()) act.block_inputs.resize(blocks_.size());
  const auto keep = [](Tensor2<T>& t, V2<const T> x, const char* name) {
    ensure_extents(t, name, x.extent(0), x.extent(1));
    Kokkos::deep_copy(t, x);
  };
  for (int l = begin; l < end; ++l) {
    params.layer();
    if (full) {  // keep the input; the blocks run in one cache
      keep(act.block_inputs[l], x, "block_input");
      aux_loss_ += blocks_[l].forward(local, act.block_inputs[l], act.blocks[begin], act.recomputed, grad_scratch_,
                                      false, units);
      x = act.blocks[begin].out;
    } else {
      aux_loss_ += blocks_[l].forward(local, x, act.blocks[l], act.recomputed, grad_scratch_, false, units);
      x = act.blocks[l].out;
    }
  }
  if (full) {
    keep(act.out, x, "stage_out");
    x = act.out;
  }
  if (!placement_.model_last(act.chunk)) return 0.0;
  params.layer();
  const double loss = head_->forward(local, x, Kokkos::subview(targets, local_rows(ctx)), head_cache(act), units,
                                     fine_ ? vocab_chunk(local.rows()) : V2<T>());
  // 2D: grid row i has batch block i's losses; the column adds up the blocks (3D: the
  // depth group)
  return tp_.sum_over_batch_blocks(loss);
}

template <class T>
V2<const T> GPT<T>::output(const StageCache& cache) const {
  const auto& act = as_acts(cache);
  const auto [begin, end] = placement_.chunk(act.chunk);
  if (begin == end)  // a layer-step buffer without layers
    return placement_.model_first(act.chunk) ? V2<const T>(act.emb.out) : act.input;
  return recompute_ == Recompute::Full ? V2<const T>(act.out) : V2<const T>(act.blocks[end - 1].out);
}

template <class T>
void GPT<T>::run_backward(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache,
                          const GradReadyFn& on_ready) {
  auto& act = as_acts(cache);
  const auto ready = [&](const std::pair<int64_t, int64_t>& r) {
    if (on_ready && r.second > r.first) on_ready(r.first, r.second - r.first);
  };
  const BlockContext local = local_context(ctx);
  const auto [begin, end] = placement_.chunk(act.chunk);
  PassParams<T> params = pass_params(act.chunk, true);  // ZeRO-3's gathers; finer units: the layers take the steps
  const auto chunks = fine_ ? wte_chunk_ranges() : std::vector<FlatRange>{};
  // the tied wte's head part summed at once where the embedding's follows (ZeRO-2/3), not
  // held through every block's backward; the last stage's copy is summed at the end, but
  // for finer units, whose chunks are summed as the head makes them on every stage (the
  // two stages' copies then have the same units, whose parts the pipeline sums)
  const bool head_part_now = store_.zero().gradients_sharded() && (placement_.first() || fine_);
  if (placement_.model_last(act.chunk)) {
    params.layer();
    const UnitHooks* head = params.units([&](int j) {
      if (head_part_now) ready(chunks[size_t(j)]);
    });
    start_backward(local, dloss_scale, dout, act, true, head);
    ready(lnf_range());  // the tied wte also got gradients here, but is not final until the embedding
    if (head_part_now && !fine_) {
      const auto& wte = store_.infos()[size_t(embedding_->wte_index())];
      ready({wte.offset, wte.offset + wte.numel});
    }
  } else {
    start_backward(local, dloss_scale, dout, act, true);
  }
  const bool full = recompute_ == Recompute::Full;
  for (int l = end; l-- > begin;) {
    const UnitHooks* units = params.units([&](int u) { ready(block_unit_ranges(l)[size_t(u)]); });
    params.layer();
    auto& k = full ? act.blocks[begin] : act.blocks[l];
    if (full)  // the same values again
      blocks_[l].forward(local, act.block_inputs[l], k, act.recomputed, grad_scratch_, true, units);
    blocks_[l].backward(local, act.dres, k, grad_scratch_, act.recomputed, dloss_scale, units);
    if (!fine_) ready(block_range(l));
  }
  if (placement_.model_first(act.chunk)) {
    embedding_->backward(local, act.dres, act.emb, params.units([&](int j) {
      ready(size_t(j) < chunks.size() ? chunks[size_t(j)] : wpe_range());
    }));
    if (!fine_) ready_embedding(ready);
  }
}

template <class T>
void GPT<T>::start_backward(const BlockContext& local, T dloss_scale, V2<const T> dout, GPTActivations<T>& act,
                            bool whole_head, const UnitHooks* units) {
  const auto& out = output(act);
  if (act.dres.extent(0) != out.extent(0) || act.dres.extent(1) != out.extent(1))
    act.dres = Tensor2<T>("dres", out.extent(0), out.extent(1));
  if (placement_.model_last(act.chunk)) {
    grad_scratch_.ensure(local.rows(), blocks_[held_block()].widths());
    if (whole_head)  // dlnf through the blocks' scratch
      head_->backward(dloss_scale, act.dres, grad_scratch_.dc, head_cache(act), grad_scratch_.rows, units,
                      units ? vocab_chunk(local.rows()) : V2<T>());
    else
      head_->backward_input(dloss_scale, act.dres, grad_scratch_.dc, head_cache(act), grad_scratch_.rows);
  } else {
    Kokkos::deep_copy(act.dres, dout);
  }
}

template <class T>
void GPT<T>::backward_input(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache) {
  if (recompute_ != Recompute::None)
    throw std::logic_error("GPT: the backward's halves run apart need parallel.recompute = \"none\"");
  if (fine_) throw std::logic_error("GPT: the backward's halves run apart with ZeRO-2/3's finer units");
  auto& act = as_acts(cache);
  const BlockContext local = local_context(ctx);
  PassParams<T> params = pass_params(act.chunk, true);  // ZeRO-3's gathers
  if (placement_.model_last(act.chunk)) params.next();
  start_backward(local, dloss_scale, dout, act, share_head_);  // shared: both halves now, before the next forward's
  const auto [begin, end] = placement_.chunk(act.chunk);
  for (int l = end; l-- > begin;) {
    params.next();
    blocks_[l].backward_input(local, act.dres, act.blocks[l], grad_scratch_, act.recomputed, dloss_scale);
  }
}

template <class T>
void GPT<T>::backward_weight(const BlockContext& ctx, StageCache& cache, const GradReadyFn& on_ready) {
  auto& act = as_acts(cache);
  const auto ready = [&](const std::pair<int64_t, int64_t>& r) {
    if (on_ready && r.second > r.first) on_ready(r.first, r.second - r.first);
  };
  if (placement_.model_last(act.chunk)) {
    if (!share_head_) head_->backward_weight(act.head);  // shared: done with the input half
    ready(lnf_range());
  }
  const auto [begin, end] = placement_.chunk(act.chunk);
  for (int l = end; l-- > begin;) {
    blocks_[l].backward_weight(act.blocks[l], act.recomputed, grad_scratch_);
    ready(block_range(l));
  }
  if (placement_.model_first(act.chunk)) {
    embedding_->backward(local_context(ctx), act.dres, act.emb);  // dres: the input half's dL/d(embedding output)
    ready_embedding(ready);
  }
}

template <class T>
std::vector<FlatRange> GPT<T>::grad_ready_order() const {
  std::vector<FlatRange> order;
  for (int k = placement_.chunk_count(); k-- > 0;) append_ready_order(pass_pieces(k), order);
  return order;
}

template <class T>
ExpertLoad GPT<T>::mixture_load() const {
  ExpertLoad total;
  total.assigned.assign(size_t(cfg_.moe_experts), 0);
  for (int l = 0; l < int(blocks_.size()); ++l)
    if (const auto* m = blocks_[l].mixture(); m && placement_.holds_layer(l)) {
      for (size_t i = 0; i < total.assigned.size(); ++i) total.assigned[i] += m->load().assigned[i];
      total.dropped += m->load().dropped;
    }
  return total;
}

template <class T>
int64_t GPT<T>::mixture_dropped_here() const {
  int64_t n = 0;
  for (int l = 0; l < int(blocks_.size()); ++l)
    if (const auto* m = blocks_[l].mixture(); m && placement_.holds_layer(l)) n += m->dropped_here();
  return n;
}

template <class T>
void GPT<T>::reset_mixture_load() {
  for (auto& b : blocks_)
    if (b.mixture()) b.mixture()->reset_load();
}

template class GPT<float>;
template class GPT<double>;
// (the CUDA build's unity build may put this file's footprint file after it in one unit,
// where the class's instantiation above covers the members defined there)
#define STRATA_GPT_INSTANTIATED

}  // namespace strata
