#pragma once
// Which part of the model a pipeline stage runs: a contiguous range of transformer layers,
// plus the embedding on the first stage and the LM head on the last. The token embedding
// is tied to the LM head, so the first and the last stage each hold a copy of wte and sum
// its gradients between them before every update.
//
// Interleaved 1F1B cuts the model into p v chunks instead and places them round-robin:
// stage r holds chunks r, r + p, ..., r + (v - 1) p (its chunks 0 .. v - 1), so the first
// stage's chunk 0 has the embedding and the last stage's chunk v - 1 the head.
#include <utility>
#include <vector>

namespace strata {

struct StagePlacement {
  int stage = 0, stages = 1;
  int layer_begin = 0, layer_end = 0;       // this stage's layers [begin, end) (interleaved: its first chunk's)
  std::vector<std::pair<int, int>> chunks;  // interleaved: every chunk's layers [begin, end)

  bool first() const { return stage == 0; }          // holds the embedding
  bool last() const { return stage == stages - 1; }  // holds the LM head
  int chunk_count() const { return chunks.empty() ? 1 : int(chunks.size()); }
  std::pair<int, int> chunk(int c) const {
    return chunks.empty() ? std::make_pair(layer_begin, layer_end) : chunks[size_t(c)];
  }
  bool model_first(int chunk) const { return first() && chunk == 0; }                // the chunk reads the data
  bool model_last(int chunk) const { return last() && chunk == chunk_count() - 1; }  // the chunk has the loss
  bool holds_layer(int l) const {
    for (int c = 0; c < chunk_count(); ++c)
      if (l >= chunk(c).first && l < chunk(c).second) return true;
    return false;
  }
  int held_layers() const {
    int n = 0;
    for (int c = 0; c < chunk_count(); ++c) n += chunk(c).second - chunk(c).first;
    return n;
  }

  // Layers split as evenly as they go: stage r gets [L r / p, L (r + 1) / p), so with
  // L % p != 0 the later stages get one more.
  static StagePlacement balanced(int n_layer, int stages, int stage) { return interleaved(n_layer, stages, 1, stage); }
  // v chunks per stage: the model's part j = c p + r gets [L j / (p v), L (j + 1) / (p v)).
  static StagePlacement interleaved(int n_layer, int stages, int v, int stage) {
    StagePlacement s;
    s.stage = stage;
    s.stages = stages;
    const int64_t parts = int64_t(stages) * v;
    for (int c = 0; c < v; ++c) {
      const int64_t j = int64_t(c) * stages + stage;
      s.chunks.emplace_back(int(n_layer * j / parts), int(n_layer * (j + 1) / parts));
    }
    s.layer_begin = s.chunks.front().first;
    s.layer_end = s.chunks.front().second;
    if (v == 1) s.chunks.clear();  // the one range is layer_begin .. layer_end
    return s;
  }
};

}  // namespace strata
