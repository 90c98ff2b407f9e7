// Deck parsing and validation as the commands read a deck (parse_model_deck: the core's keys
// and rules, then the model kind's): defaults, overrides, and one clear error per bad input.
#include <catch2/catch.hpp>

#include "core/deck.hpp"
#include "core/deck_reading.hpp"
#include "core/deck_keys.hpp"
#include "core/error.hpp"
#include "model/model_kind.hpp"

using namespace strata;

static std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_model_deck(text, "deck.toml", overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("a minimal deck gets defaults and overrides apply", "[core][deck]") {
  const Deck d = parse_model_deck("[data]\nkind = \"random\"\n[model]\nn_layer = 3\n", "deck.toml",
                                  {"run.steps=7", "optim.lr=0.01", "data.batch_size=4", "run.name=abc"});
  REQUIRE(d.model.n_layer == 3);
  REQUIRE(d.model.n_embd == 256);
  REQUIRE(d.run.steps == 7);
  REQUIRE(d.optim.lr == 0.01);
  REQUIRE(d.data.batch_size == 4);
  REQUIRE(d.run.name == "abc");
  // the resolved deck parses back to the same values
  const Deck again = parse_model_deck(d.resolved_toml, "resolved");
  REQUIRE(again.run.steps == 7);
  REQUIRE(again.optim.lr == 0.01);
  REQUIRE(again.data.kind == DataKind::Random);
  REQUIRE(again.resolved_toml.substr(again.resolved_toml.find('\n')) ==
          d.resolved_toml.substr(d.resolved_toml.find('\n')));
}

TEST_CASE("bad decks are rejected with a message naming the key and file", "[core][deck]") {
  const std::string ok = "[data]\nkind = \"random\"\n";
  CHECK(error_of(ok + "[model]\nn_layers = 2\n") == "deck.toml: unknown key 'model.n_layers'");
  CHECK(error_of(ok + "[modle]\n") == "deck.toml: unknown section [modle]");
  CHECK(error_of(ok + "[model]\nn_layer = \"two\"\n").find("model.n_layer must be an integer") != std::string::npos);
  CHECK(error_of(ok + "[optim]\nlr = -1\n") == "deck.toml: optim.lr must be > 0");
  CHECK(error_of(ok + "[model]\nn_embd = 30\nn_head = 4\n")
            .find("model.n_embd (30) must be a positive multiple of model.n_head (4)") != std::string::npos);
  CHECK(error_of(ok + "[model\n").find("deck.toml:3: not valid TOML") == 0);
  CHECK(error_of("[data]\nkind = \"text\"\n").find("data.files must list at least one file") != std::string::npos);
  CHECK(error_of(ok, {"parallel.data=3"}).find("data.batch_size (8) must be divisible by parallel.data (3)") !=
        std::string::npos);
  CHECK(error_of(ok, {"nodot=3"}) == "--set 'nodot=3': expected section.key=value");
  CHECK(error_of(ok, {"run.bogus=3"}) == "deck.toml: unknown key 'run.bogus'");
  CHECK(
      error_of(ok, {"parallel.tensor_mode=2d", "parallel.tensor_rows=2", "parallel.tensor_cols=3"}) ==
      "deck.toml: parallel.tensor_cols must equal tensor_rows for tensor_mode = \"2d\": the grid 2 x 3 is not square");
  CHECK(error_of(ok, {"parallel.tensor_rows=2", "parallel.tensor_cols=2"}) ==
        "deck.toml: parallel.tensor_rows must be 1 for tensor_mode = \"1d\" (got 2 x 2; t is tensor_cols)");
  CHECK(error_of(ok, {"parallel.tensor_cols=3"}) ==
        "deck.toml: model.n_head (4) must be divisible by parallel.tensor_cols (3)");
  CHECK(error_of(ok, {"parallel.tensor_mode=2d", "parallel.tensor_rows=2", "parallel.tensor_cols=2", "model.n_embd=34",
                      "model.n_head=2"}) == "deck.toml: model.n_embd (34) must be divisible by q^2 (4)");
  CHECK(error_of(ok, {"parallel.tensor_mode=2d", "parallel.tensor_rows=2", "parallel.tensor_cols=2",
                      "data.batch_size=6", "parallel.data=2"}) ==
        "deck.toml: data.batch_size / parallel.data / parallel.micro_batches (3) must be divisible by q = "
        "parallel.tensor_rows (2)");
  CHECK(error_of(ok, {"parallel.comm_backend=gloo"}) ==
        "deck.toml: parallel.comm_backend must be \"mpi\" or \"nccl\" (got \"gloo\")");
}

TEST_CASE("decks that would crash the TOML parser are refused; brackets and dots in strings do not count",
          "[core][deck]") {
  const std::string ok = "[data]\nkind = \"random\"\n";
  const auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  const std::string deep = "deck.toml:4: not valid TOML: nested more than 64 levels deep";
  CHECK(error_of(ok + "[run]\nx = " + repeat("[", 100) + repeat("]", 100) + "\n").find(deep) == 0);
  CHECK(error_of(ok + "[run]\nx = " + repeat("{a=", 100) + "1" + repeat("}", 100) + "\n").find(deep) == 0);
  CHECK(error_of(ok + "[run]\nx" + repeat(".\"k\"", 100) + " = 1\n").find(deep) == 0);
  CHECK(error_of(ok + "[run" + repeat(".a", 100) + "]\n").find("deck.toml:3: not valid TOML: nested more") == 0);
  // 63 levels is the parser's business (a valid but unknown key here), not a refusal
  CHECK(error_of(ok + "[run]\nx = " + repeat("[", 60) + repeat("]", 60) + "\n") == "deck.toml: unknown key 'run.x'");
  // brackets, braces and dots inside strings and comments are text
  const std::string texts = "[run]\nsteps = \"" + repeat("[{.", 200) + "\" # " + repeat("[", 200) + "\n" +
                            "[model]\n# " + repeat("{", 100) + "\n";
  CHECK(error_of(ok + texts).find("run.steps must be an integer, got string") != std::string::npos);
  const std::string multi = "[run]\nsteps = \"\"\"\n" + repeat("[", 100) + "\\\"\"\"\"\n";
  CHECK(error_of(ok + multi).find("run.steps must be an integer, got string") != std::string::npos);
  const std::string literal = "[run]\nsteps = \'\'\'" + repeat("[.", 100) + "\'\'\'\n";
  CHECK(error_of(ok + literal).find("run.steps must be an integer, got string") != std::string::npos);
  CHECK(error_of(ok, {"run.name=" + repeat("[", 70) + repeat("]", 70)})
            .find("--set run.name:1: not valid TOML: nested") == 0);
  // not UTF-8: toml11 read past its buffer on a literal string holding 0xff (found by fuzzing)
  CHECK(error_of("'\xff'") == "deck.toml:1: not valid TOML: not UTF-8 (byte 0xff)");
  CHECK(error_of(ok + "[run]\nname = \"a\xc3\"\n") == "deck.toml:4: not valid TOML: not UTF-8 (byte 0xc3)");
  CHECK(error_of(ok + "[run]\nname = \"\xed\xa0\x80\"\n").find("not UTF-8 (byte 0xed)") != std::string::npos);
  CHECK(error_of(ok + "[run]\nname = \"\xc0\xaf\"\n").find("not UTF-8 (byte 0xc0)") != std::string::npos);
  CHECK(error_of(ok + "[run]\nname = \"caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80\"\n").empty());  // é € 😀
  // integers past 64 bits are refused, not clamped; the limits themselves read as written
  CHECK(error_of(ok + "[run]\nsteps = 9223372036854775808\n") ==
        "deck.toml: run.steps must be an integer that fits in 64 bits, got 9223372036854775808");
  CHECK(error_of(ok, {"run.checkpoint_every=0x8000_0000_0000_0000"}) ==
        "deck.toml: run.checkpoint_every must be an integer that fits in 64 bits, got 0x8000_0000_0000_0000");
  CHECK(error_of(ok, {"run.checkpoint_every=9223372036854775807"}).empty());
  CHECK(error_of(ok, {"run.steps=-9223372036854775808"}) == "deck.toml: run.steps must be >= 1");
}

TEST_CASE("values that pass a range check but cannot be run are refused", "[core][deck]") {
  const std::string ok = "[data]\nkind = \"random\"\n";
  // infinities and NaN, like any non-finite number
  CHECK(error_of(ok + "[optim]\nlr = inf\n") == "deck.toml: optim.lr must be a finite number (got inf)");
  CHECK(error_of(ok + "[run]\nmax_walltime = nan\n") ==
        "deck.toml: run.max_walltime must be a finite number (got nan)");
  CHECK(error_of(ok, {"optim.grad_clip=inf"}) == "deck.toml: optim.grad_clip must be a finite number (got inf)");
  // run.name is one plain directory name
  for (const char* bad : {"run.name=.", "run.name=..", "run.name=a/b"})
    CHECK(error_of(ok, {bad}).find("run.name must be a plain name") != std::string::npos);
  // cfactor^(levels-1) that would overflow 64 bits (it used to end in SIGFPE)
  const std::string resnet =
      "[model]\nkind = \"resnet\"\nsteps = 8\n[data]\nkind = \"images\"\n[parallel]\nschedule = \"mgrit\"\n";
  CHECK(error_of(resnet, {"layerpar.levels=70", "layerpar.cfactor=4"})
            .find("must be a multiple of cfactor^(levels-1) (") != std::string::npos);
  CHECK(error_of(resnet, {"layerpar.levels=3", "layerpar.cfactor=4611686018427387904"}).find("cfactor^(levels-1)") !=
        std::string::npos);
  CHECK(error_of(resnet, {"layerpar.levels=4", "layerpar.cfactor=2"}) == "");
  // [layerpar] acts where MGRIT runs: the residual network's pipeline refuses it as having no effect
  CHECK(error_of(resnet, {"parallel.schedule=1f1b", "layerpar.levels=70"}) ==
        "deck.toml: layerpar.levels = 70 has no effect in this deck: it needs parallel.schedule = \"mgrit\"");
  CHECK(error_of(ok, {"run.on_nonfinite=ignore"}) ==
        "deck.toml: run.on_nonfinite must be \"stop\" or \"skip\" (got \"ignore\")");
  CHECK(error_of(ok, {"run.max_skipped_steps=0"}) == "deck.toml: run.max_skipped_steps must be >= 1");
}

TEST_CASE("ready dispatch and [variability]: what they cannot run is refused in one line", "[core][deck][ready]") {
  const std::string ok = "[data]\nkind = \"random\"\n";
  const std::vector<std::string> p2 = {"parallel.pipeline=2", "variability.slowdown_max=0.5"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), p2.begin(), p2.end());
    return more;
  };
  CHECK(error_of(ok, {"parallel.pipeline=2", "parallel.dispatch=fast"}) ==
        "deck.toml: parallel.dispatch must be \"order\" or \"ready\" (got \"fast\")");
  CHECK(error_of(ok, {"parallel.pipeline=2", "parallel.schedule=xpipe", "parallel.dispatch=ready"})
            .find("deck.toml: parallel.dispatch = \"ready\" does not run with schedule = \"xpipe\"") == 0);
  CHECK(error_of(ok, with({"variability.stage=2"})) ==
        "deck.toml: variability.stage = 2 is not a stage of parallel.pipeline = 2 (0 to 1, or -1 for every stage)");
  CHECK(error_of(ok, with({"variability.slowdown_min=0.6"})) ==
        "deck.toml: variability.slowdown_min must be at most variability.slowdown_max");
  CHECK(error_of(ok, with({"variability.draw=spikes", "variability.spike_chance=1.5"})) ==
        "deck.toml: variability.spike_chance must be in [0, 1]");
  CHECK(error_of(ok, with({"parallel.schedule=xpipe"})).find("variability.slowdown_max = 0.5 has no effect") !=
        std::string::npos);
  CHECK(error_of(ok, with({"variability.stage=1", "parallel.dispatch=ready", "parallel.dispatch_in_flight=4"})) == "");
}

TEST_CASE("the last stage's layers: beyond what leaves a layer to each other stage, or not a GPT, refused",
          "[core][deck][ready]") {
  const std::string ok = "[data]\nkind = \"random\"\n[model]\nn_layer = 4\n";
  CHECK(error_of(ok, {"parallel.pipeline=3", "parallel.last_stage_layers=2"}) == "");
  CHECK(error_of(ok, {"parallel.pipeline=3", "parallel.last_stage_layers=3"}) ==
        "deck.toml: parallel.last_stage_layers (3) must leave at least one layer to each other stage: at most "
        "model.n_layer - (parallel.pipeline - 1) = 2");
  CHECK(error_of(ok, {"parallel.last_stage_layers=2"}).find("parallel.last_stage_layers = 2 has no effect") !=
        std::string::npos);
  CHECK(error_of(ok, {"parallel.pipeline=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2",
                      "parallel.micro_batches=2", "parallel.last_stage_layers=2"}) ==
        "deck.toml: parallel.last_stage_layers = 2 has no effect in this deck: it needs parallel.pipeline > 1 with a "
        "schedule other than \"interleaved\"");
  const std::string resnet = "[model]\nkind = \"resnet\"\nsteps = 8\n[data]\nkind = \"images\"\n";
  CHECK(error_of(resnet, {"parallel.pipeline=2", "parallel.last_stage_layers=2"})
            .find("parallel.last_stage_layers is the GPT's") != std::string::npos);
}

TEST_CASE("the key table drives reading, the resolved deck and the reference", "[core][deck]") {
  // every key appears in the resolved deck and the reference, in its section
  const Deck d = parse_model_deck("[data]\nkind = \"random\"\n", "deck.toml");
  const std::string ref = deck_reference(model_deck_keys());
  for (const char* key : {"run.stop_timeout", "parallel.schedule", "layerpar.warm_start", "optim.grad_clip"}) {
    const std::string k = std::string(key).substr(std::string(key).find('.') + 1);
    CHECK(d.resolved_toml.find("\n" + k + " = ") != std::string::npos);
    CHECK(ref.find("| `" + k + "` |") != std::string::npos);
  }
  // enums parse from their names and print back as them
  const Deck x = parse_model_deck(
      "[data]\nkind = \"random\"\n", "deck.toml",
      {"parallel.schedule=xpipe", "parallel.pipeline=2", "parallel.micro_batches=2", "parallel.tensor_mode=2d"});
  CHECK(x.parallel.schedule == Schedule::XPipe);
  CHECK(x.parallel.tensor_mode == TensorMode::TwoD);
  CHECK(x.resolved_toml.find("schedule = \"xpipe\"") != std::string::npos);
  CHECK(parse_model_deck("[data]\nkind = \"random\"\n", "deck.toml", {"model.precision=bf16"}).model.precision ==
        Precision::BF16);
  CHECK(parse_model_deck("[model]\nkind = \"resnet\"\nsteps = 8\n[data]\nkind = \"images\"\n", "deck.toml",
                         {"model.precision=bf16"})
            .model.precision == Precision::BF16);
  CHECK(error_of("[data]\nkind = \"random\"\n", {"parallel.schedule=zigzag"}) ==
        "deck.toml: parallel.schedule must be \"gpipe\", \"1f1b\", \"interleaved\", \"zb-h1\", \"zb-h2\", \"xpipe\" or "
        "\"mgrit\" (got \"zigzag\")");
  CHECK(error_of("[data]\nkind = \"random\"\n", {"parallel.tensor_mode=serial"}) ==
        "deck.toml: parallel.tensor_mode must be \"1d\", \"2d\" or \"3d\" (got \"serial\")");
  CHECK(error_of("[data]\nkind = \"random\"\n[parallel]\nschedule = 3\n")
            .find("parallel.schedule must be a string, got integer") != std::string::npos);
  // numbers are written so that they read back exactly
  const Deck y = parse_model_deck("[data]\nkind = \"random\"\n", "deck.toml",
                                  {"optim.lr=0.1", "optim.eps=1e-300", "run.max_walltime=3600"});
  const Deck z = parse_model_deck(y.resolved_toml, "resolved");
  CHECK(z.optim.lr == 0.1);
  CHECK(z.optim.eps == 1e-300);
  CHECK(z.run.max_walltime == 3600.0);
  CHECK(y.resolved_toml.find("max_walltime = 3600.0\n") != std::string::npos);
}

TEST_CASE("each [model] key belongs to one model kind", "[core][deck]") {
  const std::string gpt = "[data]\nkind = \"random\"\n";
  const std::string resnet = "[model]\nkind = \"resnet\"\nsteps = 8\nwidth = 16\n[data]\nkind = \"images\"\n";
  const Deck r = parse_model_deck(resnet, "deck.toml");
  CHECK(r.model.steps == 8);
  CHECK(r.model.width == 16);
  CHECK(model_kind_of(r).layers(r.model) == 8);  // what parallel.pipeline divides
  // the resolved deck holds the model's own keys only, and reads back
  CHECK(r.resolved_toml.find("n_layer") == std::string::npos);
  CHECK(r.resolved_toml.find("steps = 8") != std::string::npos);
  CHECK(parse_model_deck(r.resolved_toml, "deck.toml").model.width == 16);
  const Deck g = parse_model_deck(gpt, "deck.toml");
  CHECK(g.resolved_toml.find("t_final") == std::string::npos);
  CHECK(g.resolved_toml.find("n_layer = 4") != std::string::npos);
  // the other kind's keys: refused with the key to use, unless they hold their default
  // (what decks resolved before the split wrote, e.g. a checkpoint's stored deck)
  CHECK(error_of(resnet, {"model.n_layer=8"}) ==
        "deck.toml: model.n_layer is the GPT's: for kind = \"resnet\" use model.steps");
  CHECK(error_of(resnet, {"model.n_embd=16"}) ==
        "deck.toml: model.n_embd is the GPT's: for kind = \"resnet\" use model.width");
  CHECK(error_of(gpt, {"model.channels=2"}) == "deck.toml: model.channels applies to kind = \"resnet\" only");
  CHECK(error_of(gpt + "[model]\nt_final = 1.0\nchannels = 0\nstep_init_std = 0.01\nn_layer = 2\n") == "");
  CHECK(error_of(resnet, {"model.n_layer=4", "model.n_embd=256", "model.vocab_size=256"}) == "");
}

TEST_CASE("model.kind names a kind of src/model, whose rules the deck then keeps", "[core][deck]") {
  const std::string images = "[data]\nkind = \"images\"\n";
  CHECK(error_of("[model]\nkind = \"transformer\"\nn_layer = 2\n") ==
        "deck.toml: model.kind \"transformer\" names no model kind: it must be \"gpt\", \"resnet\" or \"softmax\"");
  // the rules every kind gets from its description (model_kind.cpp), for the softmax
  // regression, which has none of its own
  const std::string softmax = "[model]\nkind = \"softmax\"\n" + images;
  CHECK(error_of(softmax) == "");
  CHECK(error_of(softmax, {"parallel.tensor_cols=2"}) ==
        "deck.toml: parallel.tensor_cols splits the layers' weights; model.kind = \"softmax\" has no tensor split: it "
        "runs data parallelism");
  CHECK(error_of(softmax, {"parallel.pipeline=2"}) ==
        "deck.toml: the softmax regression's layers (1) must be at least parallel.pipeline (2): every stage holds at "
        "least one layer");
  CHECK(
      error_of(softmax, {"parallel.recompute=selective"}) ==
      "deck.toml: parallel.recompute = \"selective\" applies to model.kind = \"gpt\" only: the softmax regression has "
      "no part of a layer that selective recomputation would drop (\"full\" recomputes whole layers)");
  CHECK(error_of(softmax, {"data.kind=random"}) == "deck.toml: data.kind \"random\" goes with model.kind = \"gpt\"");
  CHECK(error_of("[data]\nkind = \"images\"\n") ==
        "deck.toml: data.kind \"images\" goes with model.kind = \"resnet\" or \"softmax\"");
  // the deck reference lists every kind
  const std::string reference = model_kinds_reference();
  for (const auto& k : model_kinds()) CHECK(reference.find("| `" + k.name + "` |") != std::string::npos);
}
