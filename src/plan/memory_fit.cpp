#include "plan/memory_fit.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "model/model_kind.hpp"
#include "plan/layout.hpp"
#include "plan/step_prediction.hpp"

namespace strata {
namespace {

double gib(double bytes) { return bytes / double(1 << 30); }

}  // namespace

void check_fits_in_memory(const Deck& deck, const MemoryCapacity& capacity) {
  const auto& m = deck.model;
  // Counts in floating point first: a model or batch this large would overflow int64
  // inside the engine before any allocation could fail.
  const double width = double(std::max({m.n_embd, m.vocab_size, m.seq_len, m.channels * 9}));
  const double weights = double(m.n_layer) * width * width * 12;
  const double activations = double(deck.data.batch_size) * double(m.seq_len) * width * double(m.n_layer) * 32;
  const double limit = 1e16;  // bytes; 10 PB is beyond any rank, and far from 2^63
  if (4 * 4 * weights > limit || 4 * activations > limit)
    throw UserError(deck.path + strfmt(": the model is far too large for any rank (about %.3g parameters and %.3g "
                                       "activation values): check model.n_layer, n_embd, vocab_size, seq_len and "
                                       "data.batch_size",
                                       weights, activations));
  if (!is_gpt(m) || (capacity.node_bytes <= 0 && capacity.rank_bytes <= 0)) return;
  const Layout layout = deck.parallel;
  const MemoryPrediction need = predict_memory(deck, layout);
  const double per_rank = double(need.state_bytes + need.activation_bytes);
  const std::string needs = strfmt(
      ": the run needs about %.2f GiB per rank as laid out (%s: parameters, gradients and AdamW moments "
      "%.2f GiB, activations %.2f GiB), ",
      gib(per_rank), plan_name(layout).c_str(), gib(double(need.state_bytes)), gib(double(need.activation_bytes)));
  const std::string advice = "; strata plan --ranks N shows layouts that need less";
  if (capacity.rank_bytes > 0 && per_rank > double(capacity.rank_bytes))
    throw UserError(
        deck.path + needs +
        strfmt("but %s limits each rank to %.2f GiB", capacity.rank_source.c_str(), gib(double(capacity.rank_bytes))) +
        advice);
  if (capacity.node_bytes > 0 && per_rank * capacity.sharers > double(capacity.node_bytes))
    throw UserError(deck.path + needs +
                    strfmt("%d rank(s) sharing %.2f GiB of %s need %.2f GiB", capacity.sharers,
                           gib(double(capacity.node_bytes)), capacity.node_source.c_str(),
                           gib(per_rank * capacity.sharers)) +
                    advice);
}

}  // namespace strata
