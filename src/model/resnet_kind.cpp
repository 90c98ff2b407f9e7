// model.kind = "resnet": the residual network for images (resnet.hpp), whose steps are an
// ODE's (layer-parallel training by MGRIT); its deck rules, how it is built, how a run
// describes it.
#include "core/deck_key_builders.hpp"
#include "core/log.hpp"
#include "model/model_kind.hpp"
#include "model/resnet.hpp"
#include "model/resnet_steps.hpp"
#include "report/run_metrics.hpp"

namespace strata {
namespace {

// The residual network's deck keys: its steps and their width (every other kind refuses them).
DeckKeys resnet_deck_keys() {
  using namespace deck_key_builders;
  using D = Deck;
  const char* model = "model";
  const auto own = [](DeckKey k) { return for_kind(std::move(k), "resnet", "the residual network"); };
  return {
      own(key(model, &D::model, "steps", &ModelConfig::steps, at_least<int64_t>(1),
              "resnet: residual steps N (at least parallel.pipeline)")),
      own(key(model, &D::model, "width", &ModelConfig::width, at_least<int64_t>(1),
              "resnet: width of the dense steps")),
      own(key(model, &D::model, "channels", &ModelConfig::channels, at_least<int64_t>(0),
              "resnet: > 0 makes the steps 3x3 convolutions of this many channels; 0: dense of width `width`")),
      own(key(model, &D::model, "t_final", &ModelConfig::t_final, above(0.0),
              "resnet: final time T = N h of the residual steps")),
      own(key(model, &D::model, "step_init_std", &ModelConfig::step_init_std, at_least(0.0),
              "resnet: std of the residual steps' initial weights")),
  };
}

void check_resnet(const Deck& d, const DeckRule& rule) {
  const auto& p = d.parallel;
  const auto& m = d.model;
  rule(p.recompute != Recompute::Selective, "parallel.recompute",
       "= \"selective\" is the GPT's: the residual network keeps only its states already (each step's activation is "
       "remade in its backward); \"full\" keeps every k-th");
  if (p.mgrit()) check_mgrit_steps(d, m.steps, "model.steps (" + std::to_string(m.steps) + ")", rule);
  rule(p.last_stage_layers == 0, "parallel.last_stage_layers",
       "is the GPT's (its last stage runs the LM head): the residual network's stages split its steps evenly");
}

std::unique_ptr<StageModel<float>> make_resnet(const Deck& deck, const ModelPart& part) {
  ResNetConfig rc;
  rc.inputs = part.data.features;
  rc.width = deck.model.width;
  rc.channels = deck.model.channels;
  rc.steps = deck.model.steps;
  rc.classes = part.data.classes;
  rc.t_final = deck.model.t_final;
  rc.init_std = deck.model.init_std;
  rc.step_init_std = deck.model.step_init_std;
  rc.precision = deck.model.precision;
  rc.recompute_states = deck.parallel.recompute == Recompute::Full;
  auto net = std::make_unique<ResNet<float>>(
      rc, deck.run.seed, StagePlacement::balanced(int(rc.steps), int(deck.parallel.pipeline), part.stage));
  attach_steps(*net);
  return net;
}

RunDescription describe_resnet(const Deck& deck, StageModel<float>& model, const RunSetting& run) {
  const auto& resnet = static_cast<const ResNet<float>&>(model);  // what make_resnet made
  const auto& cfg = resnet.config();
  return describe_classifier(
      deck, run,
      strfmt("strata: ResNet %lld %s steps (T = %g), %lld -> %lld classes: %.3fM parameters; %s", (long long)cfg.steps,
             cfg.channels > 0 ? strfmt("3x3-convolution %lld-channel", (long long)cfg.channels).c_str()
                              : strfmt("dense width-%lld", (long long)cfg.width).c_str(),
             cfg.t_final, (long long)cfg.inputs, (long long)cfg.classes,
             double(resnet.params().table().global_numel()) / 1e6, run.data_line.c_str()));
}

// Fashion-MNIST's images (784 pixels, 10 classes) through the dense steps
std::vector<std::array<int64_t, 3>> resnet_product_shapes(const Deck& d) {
  const int64_t rows = d.data.batch_size / d.parallel.data, w = d.model.width;
  return {{rows, 784, w}, {rows, w, w}, {rows, w, 10}};
}

}  // namespace

ModelKind resnet_kind() {
  ModelKind k;
  k.name = "resnet";
  k.title = "the residual network";
  k.summary =
      "residual network for images, its steps an ODE's (layer-parallel by MGRIT): steps, width, channels, "
      "t_final, step_init_std";
  k.reads = {DataKind::Images};
  k.schedules = {Schedule::GPipe, Schedule::OneFOneB, Schedule::ZBH1, Schedule::ZBH2};
  k.pipeline = k.layer_parallel = true;
  k.layers = [](const ModelConfig& m) { return m.steps; };
  k.layers_key = "model.steps";
  k.check = check_resnet;
  k.make = make_resnet;
  k.describe = describe_resnet;
  k.product_shapes = resnet_product_shapes;
  k.keys = resnet_deck_keys();
  return k;
}

}  // namespace strata
