#pragma once
// The stage models the planner reads its figures off: each pipeline stage's GPT built as
// the run would build it (make_model, with the layout's tensor, context and expert splits),
// without memory. A search over one deck's layouts passes one DryModels to every
// prediction, which then builds each model once per shape (the layout but its micro-batch
// count and ZeRO stage, which build the same model; the stage; the product precision and
// bf16 rounding the deck copies vary) and reuses it; without one, each is built afresh.
#include <map>
#include <memory>
#include <string>

#include "core/deck.hpp"
#include "plan/layout.hpp"

namespace strata {

template <class T>
class GPT;

class DryModels {
 public:
  DryModels();
  ~DryModels();
  DryModels(const DryModels&) = delete;
  DryModels& operator=(const DryModels&) = delete;
  std::shared_ptr<GPT<float>> get(const Deck& deck, const Layout& l, int stage);

 private:
  std::map<std::string, std::shared_ptr<GPT<float>>> models_;
};

// Stage `stage`'s model under layout l: from `models` where given, else built afresh.
std::shared_ptr<GPT<float>> dry_model(DryModels* models, const Deck& deck, const Layout& l, int stage);

}  // namespace strata
