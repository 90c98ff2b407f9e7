// model.kind = "softmax": softmax regression over an image's pixels
// (softmax_regression.hpp), one layer on one stage, data parallel only; no keys of its
// own. A kind written in src/model alone: this file, its model and a line in
// model_kind.cpp.
#include "core/log.hpp"
#include "model/model_kind.hpp"
#include "model/softmax_regression.hpp"
#include "report/run_metrics.hpp"

namespace strata {
namespace {

std::unique_ptr<StageModel<float>> make_softmax(const Deck& deck, const ModelPart& part) {
  SoftmaxRegressionConfig c;
  c.inputs = part.data.features;
  c.classes = part.data.classes;
  c.init_std = deck.model.init_std;
  c.precision = deck.model.precision;
  return std::make_unique<SoftmaxRegression<float>>(c, deck.run.seed);
}

RunDescription describe_softmax(const Deck& deck, StageModel<float>& model, const RunSetting& run) {
  const auto& cfg = static_cast<const SoftmaxRegression<float>&>(model).config();  // what make_softmax made
  return describe_classifier(
      deck, run,
      strfmt("strata: softmax regression, %lld -> %lld classes: %lld parameters; %s", (long long)cfg.inputs,
             (long long)cfg.classes, (long long)model.params().table().global_numel(), run.data_line.c_str()));
}

}  // namespace

ModelKind softmax_kind() {
  ModelKind k;
  k.name = "softmax";
  k.title = "the softmax regression";
  k.summary = "softmax regression over images' pixels (one layer): no keys of its own";
  k.reads = {DataKind::Images};
  k.schedules = {Schedule::GPipe, Schedule::OneFOneB, Schedule::ZBH1, Schedule::ZBH2};  // on its one stage
  k.layers = [](const ModelConfig&) { return int64_t(1); };
  k.layers_key = "the softmax regression's layers";
  k.make = make_softmax;
  k.describe = describe_softmax;
  k.product_shapes = [](const Deck& d) {  // Fashion-MNIST's 784 pixels, 10 classes
    return std::vector<std::array<int64_t, 3>>{{d.data.batch_size / d.parallel.data, 784, 10}};
  };
  return k;
}

}  // namespace strata
