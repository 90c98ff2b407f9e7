#include "plan/memory_fit.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "plan/layout.hpp"
#include "plan/step_prediction.hpp"

namespace strata {
namespace {

Layout layout_of(const Deck& d) {
  Layout l;
  l.data = int(d.parallel.data);
  l.pipeline = int(d.parallel.pipeline);
  l.context = int(d.parallel.context);
  l.context_mode = d.parallel.context_mode;
  l.schedule = d.parallel.schedule;
  l.virtual_stages = int(d.parallel.virtual_stages);
  l.zero = int(d.parallel.zero);
  l.micro_batches = int(d.parallel.micro_batches);
  l.recompute = d.parallel.recompute;
  if (d.parallel.tensor_mode == TensorMode::TwoD) {
    l.tensor = TensorMode::TwoD;
    l.q = int(d.parallel.tensor_rows);
  } else if (d.parallel.tensor_cols > 1) {
    l.tensor = TensorMode::OneD;
    l.t = int(d.parallel.tensor_cols);
    l.sequence = d.parallel.sequence_parallel;
  }
  return l;
}

double gib(double bytes) { return bytes / double(1 << 30); }

}  // namespace

void check_fits_in_memory(const Deck& deck, int64_t capacity_bytes, int sharers) {
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
  if (!m.is_gpt() || capacity_bytes <= 0) return;
  const MemoryPrediction need = predict_memory(deck, layout_of(deck));
  const double per_rank = double(need.state_bytes + need.activation_bytes);
  if (per_rank * sharers <= double(capacity_bytes)) return;
  throw UserError(deck.path + strfmt(": the run needs about %.2f GiB per rank (parameters, gradients and AdamW moments "
                                     "%.2f GiB, activations %.2f GiB), %d rank(s) sharing %.2f GiB need %.2f GiB; "
                                     "strata plan --ranks N shows layouts that need less",
                                     gib(per_rank), gib(double(need.state_bytes)), gib(double(need.activation_bytes)),
                                     sharers, gib(double(capacity_bytes)), gib(per_rank * sharers)));
}

}  // namespace strata
