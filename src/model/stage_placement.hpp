#pragma once
// Which part of the model a pipeline stage runs: a contiguous range of transformer layers,
// plus the embedding on the first stage and the LM head on the last. The token embedding
// is tied to the LM head, so the first and the last stage each hold a copy of wte and sum
// its gradients between them before every update.
namespace strata {

struct StagePlacement {
  int stage = 0, stages = 1;
  int layer_begin = 0, layer_end = 0;  // this stage's layers [begin, end)
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
  bool holds_layer(int l) const { return l >= layer_begin && l < layer_end; }

  // Layers split as evenly as they go: stage r gets [L r / p, L (r + 1) / p), so with
  // L % p != 0 the later stages get one more.
  static StagePlacement balanced(int n_layer, int stages, int stage) {
    StagePlacement s;
    s.stage = stage;
    s.stages = stages;
    s.layer_begin = int(int64_t(n_layer) * stage / stages);
    s.layer_end = int(int64_t(n_layer) * (stage + 1) / stages);
    return s;
  }
};

}  // namespace strata
