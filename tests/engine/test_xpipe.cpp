// XPipe on MPI against an in-process interpretation of the same instruction lists: every
// stage is a GPT of its layers in one process, messages go through a mailbox, and the
// stages take turns until each is blocked on a message not yet sent (the simulator's
// loop). The interpreter is written from the semantics alone (predict the stage's
// weights to its target, restore them, update at the step; the last stage's embedding
// copy follows the first stage's versions), so the executor's rings, tags, tied-weight
// exchange and update order are checked against it. Then XPipe with data and tensor
// parallelism inside the stages against XPipe alone, a checkpoint restart in the middle
// of an XPipe run, and the staleness of predicted against current weights.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "comm/grid.hpp"
#include "core/deck.hpp"
#include "engine/pipeline/xpipe_engine.hpp"
#include "optim/grad_clip.hpp"
#include "support/gather_params.hpp"
#include "support/host_views.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

ModelConfig tiny_model() {
  ModelConfig m;
  m.n_layer = 5;  // uneven over 2 and 4 stages
  m.n_embd = 12;
  m.n_head = 4;
  m.vocab_size = 40;
  m.seq_len = 5;
  return m;
}

OptimConfig test_optim() {
  OptimConfig o;
  o.lr = 2e-2;  // large steps: stale and predicted weights differ visibly
  o.min_lr = 2e-3;
  o.warmup_steps = 2;  // the rate changes from update to update
  o.grad_clip = 0.05;  // and the per-stage clipping is active
  return o;
}

constexpr int64_t kRunSteps = 6;  // the learning-rate schedule's length
double lr_of(int64_t step) { return lr_at_step(test_optim(), step, kRunSteps); }

struct StageState {
  std::unique_ptr<GPT<double>> model;
  std::unique_ptr<AdamW<double>> optim;
  std::unique_ptr<WeightPredictor<double>> predictor;
  std::map<int, GPTActivations<double>> acts;  // per micro-batch
  std::map<int, Tensor2<double>> input, dout;  // received, per micro-batch
  size_t pc = 0;
  int64_t updates = 0, tied_versions = 0;
};

Tensor2<double> copy2(V2<const double> v) {
  Tensor2<double> c("copy", v.extent(0), v.extent(1));
  Kokkos::deep_copy(c, v);
  return c;
}
Tensor1<double> copy1(V1<const double> v) {
  Tensor1<double> c("copy", v.extent(0));
  Kokkos::deep_copy(c, v);
  return c;
}

// Runs schedule s over the mini-batches in one process; returns the summed loss per
// mini-batch and leaves each stage's state in stages.
std::vector<double> interpret(const PipeSchedule& s, const ModelConfig& cfg, std::vector<StageState>& stages,
                              const std::vector<SampleBatch<double>>& batches, int64_t batch) {
  const int p = s.stages, t = s.micro_batches;
  const int64_t bm = batch / t, t_len = cfg.seq_len;
  const BlockContext ctx{bm, t_len};
  const OptimConfig oc = test_optim();
  stages.clear();
  for (int r = 0; r < p; ++r) {
    StageState st;
    st.model =
        std::make_unique<GPT<double>>(cfg, 7, TensorParallel{}, StagePlacement::balanced(int(cfg.n_layer), p, r));
    st.optim = std::make_unique<AdamW<double>>(oc);
    st.predictor = std::make_unique<WeightPredictor<double>>(oc);
    stages.push_back(std::move(st));
  }
  std::vector<double> loss(s.mini_batches, 0.0);
  std::map<std::tuple<int, int, int>, Tensor1<double>> tied_mail;  // (kind, from, mini-batch)
  std::map<std::tuple<int, int, int>, Tensor2<double>> mail;       // (kind, from, micro-batch)
  const auto rows = [&](int mb) { return std::make_pair(mb % t * bm * t_len, (mb % t + 1) * bm * t_len); };
  bool moved = true;
  while (moved) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      StageState& st = stages[r];
      auto& store = st.model->params();
      const int wte = st.model->params().table().tied_index();
      const auto wslice = [&](Tensor1<double>& buf) {
        const auto& info = store.infos()[wte];
        return V1<double>(buf.data() + info.offset, info.numel);
      };
      const bool tied_copy = r == p - 1 && p > 1;
      const auto& prog = s.programs[r];
      while (st.pc < prog.size()) {
        const PipeInstr& in = prog[st.pc];
        if (in.op == PipeOp::RecvAct || in.op == PipeOp::RecvGrad) {
          const auto key = std::make_tuple(in.op == PipeOp::RecvAct ? 0 : 1, in.peer, in.mb);
          if (!mail.count(key)) break;
          (in.op == PipeOp::RecvAct ? st.input : st.dout)[in.mb] = mail[key];
        } else if (in.op == PipeOp::RecvTiedGrad || in.op == PipeOp::RecvTiedWeights) {
          const auto key = std::make_tuple(in.op == PipeOp::RecvTiedGrad ? 0 : 1, in.peer, in.mb);
          if (!tied_mail.count(key)) break;
          const Tensor1<double> msg = tied_mail[key];
          if (in.op == PipeOp::RecvTiedGrad) {
            auto g = wslice(store.grads());
            auto hg = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g);
            auto hm = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), msg);
            for (size_t i = 0; i < hg.extent(0); ++i) hg(i) += hm(i);
            Kokkos::deep_copy(g, hg);
          } else {
            const int64_t n = int64_t(msg.extent(0)) / 3;
            Kokkos::deep_copy(wslice(store.params()), Kokkos::subview(msg, std::make_pair(int64_t(0), n)));
            Kokkos::deep_copy(wslice(store.zero().adam_m()), Kokkos::subview(msg, std::make_pair(n, 2 * n)));
            Kokkos::deep_copy(wslice(store.zero().adam_v()), Kokkos::subview(msg, std::make_pair(2 * n, 3 * n)));
            ++st.tied_versions;
          }
        } else if (in.op == PipeOp::Forward) {
          const SampleBatch<double>& b = batches[in.mb / t];
          SampleBatch<double> micro;
          micro.samples = bm;
          micro.tokens = Kokkos::subview(b.tokens, rows(in.mb));
          micro.targets = Kokkos::subview(b.targets, rows(in.mb));
          loss[in.mb / t] += st.model->forward(
              ctx, micro, r == 0 ? V2<const double>() : V2<const double>(st.input[in.mb]), st.acts[in.mb]);
        } else if (in.op == PipeOp::Backward) {
          st.model->backward(ctx, 1.0 / double(batch * t_len),
                             r == p - 1 ? V2<const double>() : V2<const double>(st.dout[in.mb]), st.acts[in.mb]);
        } else if (in.op == PipeOp::SendAct) {
          mail[{0, r, in.mb}] = copy2(st.model->output(st.acts[in.mb]));
        } else if (in.op == PipeOp::SendGrad) {
          mail[{1, r, in.mb}] = copy2(st.acts[in.mb].dres);
        } else if (in.op == PipeOp::PredictWeights) {
          std::vector<std::pair<int, Lookahead>> except;
          if (tied_copy) except.push_back({wte, {in.tied_steps, st.tied_versions}});
          st.predictor->predict(store, lr_of(st.updates), {in.steps, st.optim->steps_taken()}, except);
        } else if (in.op == PipeOp::RestoreWeights) {
          st.predictor->restore(store);
        } else if (in.op == PipeOp::OptimizerStep) {
          clip_grad_norm<double>(store, nullptr, test_optim().grad_clip);
          st.optim->step(store, lr_of(in.mb), tied_copy ? wte : -1);
          store.zero_grads();
          ++st.updates;
        } else if (in.op == PipeOp::SendTiedGrad) {
          tied_mail[{0, r, in.mb}] = copy1(wslice(store.grads()));
          Kokkos::deep_copy(wslice(store.grads()), 0.0);
        } else if (in.op == PipeOp::SendTiedWeights) {
          const int64_t n = int64_t(wslice(store.params()).extent(0));
          Tensor1<double> msg("tied", 3 * n);
          Kokkos::deep_copy(Kokkos::subview(msg, std::make_pair(int64_t(0), n)), wslice(store.params()));
          Kokkos::deep_copy(Kokkos::subview(msg, std::make_pair(n, 2 * n)), wslice(store.zero().adam_m()));
          Kokkos::deep_copy(Kokkos::subview(msg, std::make_pair(2 * n, 3 * n)), wslice(store.zero().adam_v()));
          tied_mail[{1, r, in.mb}] = msg;
        }
        ++st.pc;
        moved = true;
      }
    }
  }
  for (int r = 0; r < p; ++r) REQUIRE(stages[r].pc == s.programs[r].size());  // no stage stuck
  return loss;
}

Deck xpipe_deck(const std::vector<std::string>& overrides, const std::string& name = "xpipe", int64_t steps = 12,
                int64_t every = 0) {
  std::vector<std::string> all = {"run.out_dir=xpipe_test_runs",
                                  "run.val_every=6",
                                  "run.val_batches=1",
                                  "run.seed=5",
                                  "run.log_every=4",
                                  "model.n_layer=5",
                                  "data.batch_size=12",
                                  "parallel.schedule=xpipe",
                                  "parallel.micro_batches=3",
                                  "run.name=" + name,
                                  "run.steps=" + std::to_string(steps),
                                  "run.checkpoint_every=" + std::to_string(every)};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return small_gpt_deck(all);
}

}  // namespace

TEST_CASE("XPipe on MPI equals an in-process interpretation of its lists", "[mpi][pipeline][xpipe]") {
  const int n = world_size(), rank = world_rank();
  if (n != 2 && n != 4) return;  // all ranks are stages
  const ModelConfig cfg = tiny_model();
  const int64_t batch = 6, k = 5;
  const auto [tokens, targets] = pattern_tokens(k * batch * cfg.seq_len, cfg.vocab_size);
  std::vector<SampleBatch<double>> batches;
  for (int64_t b = 0; b < k; ++b) {
    const auto rows = std::make_pair(b * batch * cfg.seq_len, (b + 1) * batch * cfg.seq_len);
    SampleBatch<double> mini;
    mini.samples = batch;
    mini.tokens = Kokkos::subview(tokens, rows);
    mini.targets = Kokkos::subview(targets, rows);
    batches.push_back(mini);
  }
  Layout pc;
  pc.pipeline = n;
  Grid grid(pc, MPI_COMM_WORLD);
  for (const int t : {1, 2, 3}) {
    GPT<double> model(cfg, 7, {}, StagePlacement::balanced(int(cfg.n_layer), n, rank));
    XPipeEngine<double> engine(model, grid, t);
    OptimizerStep<double> step(test_optim(), kRunSteps, OptimizerGroups{});
    StreamUpdate<double> update;
    update.step = &step;
    Timers timers;
    const auto steps = engine.train_stream(0, batches, batch, update, timers);

    std::vector<StageState> stages;
    const auto ref_loss = interpret(engine.schedule_for(int(k)), cfg, stages, batches, batch);
    INFO(n << " stages, T = " << t);
    REQUIRE(steps.size() == size_t(k));
    for (int64_t b = 0; b < k; ++b)
      CHECK(steps[b].loss == Approx(ref_loss[b] / double(batch * cfg.seq_len)).epsilon(1e-13));
    // this rank's stage: parameters and Adam moments, bit for bit up to rounding
    auto& mine = model.params();
    auto& ref = stages[rank].model->params();
    const auto diff = [](const Tensor1<double>& a, const Tensor1<double>& b) {
      const auto ha = to_host<double>(a), hb = to_host<double>(b);
      double d = 0;
      for (size_t i = 0; i < ha.size(); ++i) d = std::max(d, std::abs(ha[i] - hb[i]));
      return d;
    };
    CHECK(diff(mine.params(), ref.params()) < 1e-13);
    CHECK(diff(mine.zero().adam_m(), ref.zero().adam_m()) < 1e-13);
    CHECK(diff(mine.zero().adam_v(), ref.zero().adam_v()) < 1e-13);
    // after the drain the last stage's copy of the tied embedding is the first stage's
    const auto wte_of = [&](int r) {
      return to_host<double>(copy1(stages[r].model->params().param(stages[r].model->params().table().tied_index())));
    };
    CHECK(wte_of(0) == wte_of(n - 1));
    CHECK(step.adamw().steps_taken() == k);
  }
}

TEST_CASE("XPipe with data and tensor parallelism in the stages equals XPipe alone", "[mpi][pipeline][xpipe]") {
  const int n = world_size(), rank = world_rank();
  if (n != 4 && n != 8) return;
  // the reference: XPipe on 2 stages, ranks 0 and 1
  MPI_Comm pair;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
  TrainResult ref;
  std::vector<double> ref_params;
  if (pair != MPI_COMM_NULL) {
    Training t(xpipe_deck({"parallel.pipeline=2"}), pair, quiet());
    ref = t.run();
    ref_params = global_params_of(t);
    MPI_Comm_free(&pair);
  }
  std::vector<std::vector<std::string>> layouts;
  if (n == 4)
    layouts = {{"parallel.pipeline=2", "parallel.data=2"},
               {"parallel.pipeline=2", "parallel.tensor_cols=2"},
               {"parallel.pipeline=2", "parallel.context=2"}};
  if (n == 8)
    layouts = {
        {"parallel.pipeline=2", "parallel.tensor_mode=2d", "parallel.tensor_rows=2", "parallel.tensor_cols=2"},
        {"parallel.pipeline=2", "parallel.context=2", "parallel.tensor_cols=2", "parallel.sequence_parallel=true"}};
  for (const auto& layout : layouts) {
    Training t(xpipe_deck(layout), MPI_COMM_WORLD, quiet());
    const TrainResult r = t.run();
    const auto params = global_params_of(t);
    if (rank == 0) {
      INFO(describe(layout) << " on " << n << " ranks");
      REQUIRE(r.losses.size() == ref.losses.size());
      double worst = 0;
      for (size_t s = 0; s < r.losses.size(); ++s)
        worst = std::max(worst, std::abs(r.losses[s] - ref.losses[s]) / ref.losses[s]);
      std::printf("xpipe equivalence, %s on %d ranks: worst loss rel diff %.2e, param max diff %.2e\n",
                  describe(layout).c_str(), n, worst, max_abs_diff(params, ref_params));
      CHECK(worst < 3e-7);  // float sums in another order, as in the GPipe/1F1B test
      CHECK(max_abs_diff(params, ref_params) < 5e-5);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("an XPipe run restarts from its checkpoint on the same trajectory", "[mpi][pipeline][xpipe][checkpoint]") {
  if (world_size() != 2) return;
  if (world_rank() == 0) std::filesystem::remove_all("xpipe_test_runs");
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> two = {"parallel.pipeline=2"};
  // streams drain at steps 1, 4, 6 (checkpoint), 8, 12: the restart streams 7-8 and 9-12 the same way
  const TrainResult full = Training(xpipe_deck(two, "full", 12, 6), MPI_COMM_WORLD, quiet(true)).run();
  const TrainResult resumed = Training(xpipe_deck(two, "resumed", 12), MPI_COMM_WORLD,
                                       quiet(false, "xpipe_test_runs/full/checkpoints/ckpt_00000006.h5"))
                                  .run();
  CHECK(resumed.first_step == 6);
  REQUIRE(resumed.losses.size() == 6);
  for (size_t i = 0; i < 6; ++i) CHECK(resumed.losses[i] == Approx(full.losses[6 + i]).epsilon(1e-12));
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("XPipe's weight prediction brings each pass's weights closer to its target", "[mpi][pipeline][xpipe]") {
  if (world_size() != 2) return;
  // one trajectory: each pass's predicted weights and the current (stale) ones, both
  // measured against the weights the stage holds at the pass's target
  Training t(xpipe_deck({"parallel.pipeline=2", "parallel.measure_staleness=true", "run.steps=16"}), MPI_COMM_WORLD,
             quiet());
  const TrainResult r = t.run();
  REQUIRE(r.staleness.size() == 2);
  double used = 0, current = 0, ahead = 0;
  for (const auto& s : r.staleness) {
    used += s.sum_used;
    current += s.sum_current;
    ahead += double(s.ahead);
  }
  REQUIRE(ahead > 0);
  if (world_rank() == 0)
    std::printf(
        "xpipe staleness (small GPT, 16 steps): mean |W - W_target| / |W_target| %.3e predicted, %.3e current\n",
        used / ahead, current / ahead);
  CHECK(current > 0);
  CHECK(used < 0.75 * current);
}
