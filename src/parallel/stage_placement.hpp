#pragma once
// Which part of the model a pipeline stage runs: a contiguous range of transformer layers,
// plus the embedding on the first stage and the LM head on the last. The token embedding
// is tied to the LM head, so the first and the last stage each hold a copy of wte and sum
// its gradients between them before every update.
//
// Interleaved 1F1B cuts the model into p v chunks instead and places them round-robin:
// stage r holds chunks r, r + p, ..., r + (v - 1) p (its chunks 0 .. v - 1), so the first
// stage's chunk 0 has the embedding and the last stage's chunk v - 1 the head.
//
// Layer-parallel training (model/gpt_layer_steps.hpp) makes the layers between an open
// and a close buffer the steps of an ODE, spread over the layer ranks as evenly as
// balanced() spreads layers: rank r holds its block of steps as a chunk, the first rank
// before it the open buffer's layers (with the embedding) as its chunk 0, the last rank
// after it the close buffer's (with the head) as its last chunk; a buffer chunk may hold
// no layer.
#include <utility>
#include <vector>

namespace strata {

struct StagePlacement {
  int stage = 0, stages = 1;
  int layer_begin = 0, layer_end = 0;       // this stage's layers [begin, end) (interleaved: its first chunk's)
  std::vector<std::pair<int, int>> chunks;  // interleaved: every chunk's layers [begin, end)
  int step_offset = -1;                     // layer steps: the first step's layer (the open buffer's size), else -1
  int step_count = 0;                       // layer steps: how many (every rank's)

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
  bool holds_layer_steps() const { return step_offset >= 0; }
  int steps_chunk() const { return holds_layer_steps() && first() ? 1 : 0; }  // the chunk of the rank's steps
  int held_layers() const {
    int n = 0;
    for (int c = 0; c < chunk_count(); ++c) n += chunk(c).second - chunk(c).first;
    return n;
  }

  // Layers split as evenly as they go: stage r gets [L r / p, L (r + 1) / p), so with
  // L % p != 0 the later stages get one more.
  static StagePlacement balanced(int n_layer, int stages, int stage) { return interleaved(n_layer, stages, 1, stage); }
  // The last stage holds the last `last_layers` layers (with the LM head), the others split
  // the rest as balanced() does.
  static StagePlacement with_last(int n_layer, int stages, int last_layers, int stage) {
    StagePlacement s;
    if (stage == stages - 1) {
      s.layer_begin = n_layer - last_layers;
      s.layer_end = n_layer;
    } else {
      s = balanced(n_layer - last_layers, stages - 1, stage);
    }
    s.stage = stage;
    s.stages = stages;
    return s;
  }
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
  // Layer steps: n_layer - open - close steps over `stages` layer ranks.
  static StagePlacement layer_steps(int n_layer, int open, int close, int stages, int stage) {
    const StagePlacement steps = balanced(n_layer - open - close, stages, stage);
    StagePlacement s;
    s.stage = stage;
    s.stages = stages;
    s.step_offset = open;
    s.step_count = n_layer - open - close;
    if (s.first()) s.chunks.emplace_back(0, open);
    s.chunks.emplace_back(open + steps.layer_begin, open + steps.layer_end);
    if (s.last()) s.chunks.emplace_back(n_layer - close, n_layer);
    s.layer_begin = s.chunks.front().first;
    s.layer_end = s.chunks.front().second;
    return s;
  }
};

}  // namespace strata
