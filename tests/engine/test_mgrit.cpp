// Layer-parallel MGRIT on a residual network (double precision) against the serial
// network: one level is the serial forward exactly on 1, 2 and 4 ranks; k two-level FCF
// iterations make the first 2k C-points exact (and not the ones after); iterated to
// tolerance, MGRIT gives the serial states to 1e-10 relative and the adjoint MGRIT the
// serial backprop gradients to 1e-10 relative, on even blocks and on blocks that split
// coarse intervals between ranks or leave a rank without coarse points; so does the
// training driver (LayerParallel), alone and with data replicas. The cost model replays
// the solver's step and message counts rank by rank.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <vector>

#include "comm/grid.hpp"
#include "engine/layer_parallel/layer_parallel.hpp"
#include "engine/layer_parallel/mgrit_cost.hpp"
#include "model/resnet.hpp"
#include "model/resnet_steps.hpp"
#include "support/host_views.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

ResNetConfig small_resnet(int64_t steps = 64) {
  ResNetConfig c;
  c.inputs = 12;
  c.width = 6;
  c.steps = steps;
  c.classes = 4;
  c.t_final = 2.0;
  c.step_init_std = 0.5;  // weights far from zero: the steps differ visibly
  return c;
}

struct Data {
  Tensor2<double> x;
  Tensor1<int32_t> labels;
};

Data make_data(const ResNetConfig& c, int64_t batch) {
  Data d{Tensor2<double>("x", batch, c.inputs), Tensor1<int32_t>("labels", batch)};
  auto hx = Kokkos::create_mirror_view(d.x);
  auto hl = Kokkos::create_mirror_view(d.labels);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t p = 0; p < c.inputs; ++p) hx(i, p) = std::sin(0.7 * double(i * c.inputs + p) + 0.3);
    hl(i) = int32_t(i % c.classes);
  }
  Kokkos::deep_copy(d.x, hx);
  Kokkos::deep_copy(d.labels, hl);
  return d;
}

double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    n = std::max(n, std::abs(b[i]));
  }
  return d / n;
}

std::vector<double> host(V1<const double> v) {
  Tensor1<double> c("copy", v.extent(0));
  Kokkos::deep_copy(c, v);
  return to_host<double>(c);
}

double comm_max(double x) {
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return x;
}

V2<double> adj_state(V1<double> x, int64_t batch, int64_t width) { return V2<double>(x.data(), batch, width); }

// The layer-parallel gradients in the serial store's layout: each rank fills in the
// parameters it holds, the sum over ranks assembles them.
std::vector<double> global_grads(ResNet<double>& serial, ResNet<double>& par) {
  std::vector<double> out(size_t(serial.params().numel()), 0.0);
  const auto local = to_host<double>(par.params().grads());
  const auto& infos = par.params().infos();
  for (size_t i = 0; i < infos.size(); ++i)
    for (int64_t e = 0; e < infos[i].numel; ++e)
      out[size_t(serial.params().infos()[i].offset + e)] = local[size_t(infos[i].offset + e)];
  MPI_Allreduce(MPI_IN_PLACE, out.data(), int(out.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

// The serial network on the whole batch: every state, the summed loss and the gradients
// of the mean loss.
struct Serial {
  ResNet<double> net;
  std::vector<Tensor2<double>> u;
  Tensor2<double> logits;
  Tensor1<double> lse;
  double loss = 0;
  std::vector<double> grads;
  Serial(const ResNetConfig& c, const Data& d) : net(c, 3) {
    const int64_t batch = d.x.extent(0);
    loss = net.forward(d.x, d.labels, u, logits, lse);
    net.params().zero_grads();
    net.backward(d.x, d.labels, 1.0 / double(batch), u, logits, lse);
    grads = to_host<double>(net.params().grads());
  }
  std::vector<double> state(int64_t n) const { return to_host<double>(Tensor1<double>(u[n].data(), u[n].size())); }
};

// A way to split the steps over the ranks, and the MGRIT hierarchy on it.
struct MgritCase {
  const char* name;
  int64_t steps;
  int cfactor, levels;
  bool uneven;  // the first ranks get one step each, the rest is split evenly
  std::vector<int64_t> bounds() const {
    const int p = world_size();
    if (!uneven || p == 1) return MgritLayout::balanced(steps, p);
    std::vector<int64_t> b(size_t(p) + 1);
    const int ones = p / 2;
    for (int r = 0; r <= ones; ++r) b[size_t(r)] = r;
    for (int r = ones; r <= p; ++r) b[size_t(r)] = ones + (steps - ones) * (r - ones) / (p - ones);
    return b;
  }
};

// even blocks aligned with the coarsest grid on 1, 2, 4 ranks; blocks that split coarse
// intervals (18 over 4 ranks: 0 4 9 13 18, with c = 3); blocks smaller than an interval
// (16 over 4 ranks with c = 8: ranks 0 and 2 hold no coarse point); uneven blocks (on 4
// ranks 0 1 2 10 18: ranks 0 and 1 sit out the coarse levels)
const MgritCase kLayouts[] = {{"64 steps, c 4, 3 levels, even", 64, 4, 3, false},
                              {"18 steps, c 3, 3 levels, even", 18, 3, 3, false},
                              {"16 steps, c 8, 2 levels, even", 16, 8, 2, false},
                              {"18 steps, c 3, 3 levels, uneven", 18, 3, 3, true}};

StagePlacement placement_of(const std::vector<int64_t>& bounds) {
  StagePlacement s;
  s.stage = world_rank();
  s.stages = world_size();
  s.layer_begin = int(bounds[size_t(s.stage)]);
  s.layer_end = int(bounds[size_t(s.stage) + 1]);
  return s;
}

// The layer-parallel network of this rank and its MGRIT forward solve.
struct Parallel {
  std::vector<int64_t> bounds;
  ResNet<double> net;
  Comm comm;
  OdeForwardSteps<double> steps;
  Mgrit<double> mgrit;
  Parallel(const ResNetConfig& c, int64_t batch, MgritOptions opt, std::vector<int64_t> blocks = {})
      : bounds(blocks.empty() ? MgritLayout::balanced(c.steps, world_size()) : blocks), net(c, 3, placement_of(bounds)),
        comm(MPI_COMM_WORLD), steps(*attach_steps(net).ode_network(), batch, opt.cfactor), mgrit(steps, comm, c.steps, opt, bounds) {}
  MgritStats forward(const Data& d) {
    if (world_rank() == 0) net.open_forward(d.x, steps.as_state(mgrit.point(0)));
    mgrit.zero_guess();
    return mgrit.solve();
  }
};

}  // namespace

TEST_CASE("MGRIT with one level is the serial network, bit for bit", "[mpi][mgrit]") {
  const ResNetConfig c = small_resnet();
  const int64_t batch = 5;
  const Data d = make_data(c, batch);
  const Serial serial(c, d);

  MgritOptions opt;
  opt.levels = 1;
  Parallel par(c, batch, opt);
  par.forward(d);
  for (int64_t j = 0; j <= par.mgrit.points(); ++j) {
    const int64_t n = par.mgrit.first_point() + j;
    INFO("point " << n);
    CHECK(host(par.mgrit.point(j)) == serial.state(n));
  }
}

TEST_CASE("two-level MGRIT with FCF relaxation makes 2 more C-points exact per iteration", "[mpi][mgrit]") {
  for (const MgritCase& lay : {kLayouts[0], kLayouts[3]}) {
    const ResNetConfig c = small_resnet(lay.steps);
    const int64_t batch = 5;
    const Data d = make_data(c, batch);
    const Serial serial(c, d);
    for (int k = 1; 2 * k + 1 <= std::min<int64_t>(7, c.steps / lay.cfactor); ++k) {
      MgritOptions opt;
      opt.levels = 2;
      opt.cfactor = lay.cfactor;
      opt.fcf = true;
      opt.max_iterations = k;
      opt.tolerance = 0;
      Parallel par(c, batch, opt, lay.bounds());
      par.forward(d);
      double worst_exact = 0, first_inexact = 0;
      for (int64_t j = 1; j <= par.mgrit.points(); ++j) {
        const int64_t n = par.mgrit.first_point() + j;
        if (n % opt.cfactor != 0) continue;
        const double e = rel_diff(host(par.mgrit.point(j)), serial.state(n));
        if (n / opt.cfactor <= 2 * k) worst_exact = std::max(worst_exact, e);
        if (n / opt.cfactor == 2 * k + 1) first_inexact = e;
      }
      worst_exact = comm_max(worst_exact);
      first_inexact = comm_max(first_inexact);
      INFO(lay.name << ", " << k << " iterations: C-points 1.." << 2 * k << " off by " << worst_exact << ", C-point "
                    << 2 * k + 1 << " by " << first_inexact);
      CHECK(worst_exact < 1e-13);
      CHECK(first_inexact > 1e-8);  // and no further: the property is sharp
    }
  }
}

TEST_CASE("MGRIT to tolerance on any blocks: serial states and serial gradients", "[mpi][mgrit]") {
  for (const MgritCase& lay : kLayouts) {
    INFO(lay.name << " over " << world_size() << " ranks");
    const ResNetConfig c = small_resnet(lay.steps);
    const int64_t batch = 5;
    const Data d = make_data(c, batch);
    Serial serial(c, d);
    const double loss = serial.loss;

    MgritOptions opt;
    opt.levels = lay.levels;
    opt.cfactor = lay.cfactor;
    opt.tolerance = 1e-11;
    opt.max_iterations = 30;
    Parallel par(c, batch, opt, lay.bounds());
    const MgritStats fwd = par.forward(d);
    if (world_rank() == 0) {
      std::printf("mgrit forward (%s, %d ranks, F-relaxation): %d iterations, residuals", lay.name, world_size(),
                  fwd.iterations);
      for (double r : fwd.residuals) std::printf(" %.1e", r);
      std::printf(", factor %.3f\n", fwd.convergence_factor());
    }
    CHECK(fwd.converged);
    double state_err = 0;  // every point this rank holds, its ghost included
    for (int64_t j = 0; j <= par.mgrit.points(); ++j)
      state_err = std::max(state_err, rel_diff(host(par.mgrit.point(j)), serial.state(par.mgrit.first_point() + j)));
    CHECK(comm_max(state_err) < 1e-10);

    // loss and dL/du_N on the last rank; the adjoint solve on the reversed ranks and blocks
    const int rank = world_rank(), last = world_size() - 1;
    auto& net = par.net;
    net.params().zero_grads();
    StepScratch<double> scratch;
    Tensor2<double> plogits("logits", batch, c.classes);
    Tensor1<double> plse("lse", batch), losses("losses", batch);
    Layout layers;  // the grid's reversed pipeline group: the adjoint's ranks
    layers.pipeline = world_size();
    const Grid grid(layers, MPI_COMM_WORLD);
    OdeAdjointSteps<double> adj(*net.ode_network(), par.mgrit, batch, opt.cfactor);
    Mgrit<double> adjoint(adj, grid.pipeline_reversed(), c.steps, opt, par.mgrit.layout().reversed().bounds());
    adjoint.zero_guess();
    double ploss = 0;
    if (rank == last) {
      const auto un = par.steps.as_state(par.mgrit.point(par.mgrit.points()));
      ploss = net.close_forward(un, d.labels, plogits, plse, losses);
      net.close_backward(un, d.labels, 1.0 / double(batch), plogits, plse, adj_state(adjoint.point(0), batch, c.width));
    }
    CHECK(comm_max(std::abs(ploss - (rank == last ? loss : ploss))) < 1e-10 * loss);
    const MgritStats bwd = adjoint.solve();
    CHECK(bwd.converged);
    adj.accumulate_gradients(adjoint);
    if (rank == 0)  // lambda_0 is the adjoint's last point on the first forward rank
      net.open_backward(d.x, adj_state(adjoint.point(adjoint.points()), batch, c.width), scratch);
    const double grad_err = rel_diff(global_grads(serial.net, net), serial.grads);
    if (rank == 0) std::printf("mgrit adjoint: %d iterations, gradient rel diff %.2e\n", bwd.iterations, grad_err);
    CHECK(grad_err < 1e-10);
  }
}

TEST_CASE("the layer-parallel driver to tolerance gives the serial loss and gradients, with data replicas too",
          "[mpi][mgrit]") {
  const int n = world_size(), rank = world_rank();
  for (const MgritCase& lay : {kLayouts[0], kLayouts[1]})  // even blocks; blocks that split coarse intervals
    for (const int data : {1, 2}) {
      if (n % data != 0) continue;
      const ResNetConfig c = small_resnet(lay.steps);
      const int64_t batch = 6;
      const Data d = make_data(c, batch);
      Serial serial(c, d);
      const double loss = serial.loss / double(batch);
      const auto& serial_grads = serial.grads;
      const int layers = n / data;
      Layout pc;
      pc.data = data;
      pc.pipeline = layers;
      Grid grid(pc, MPI_COMM_WORLD);
      ResNet<double> net(c, 3, StagePlacement::balanced(int(c.steps), layers, grid.coords().pipeline));
      attach_steps(net);
      LayerParallelOptions o;
      o.forward.levels = o.backward.levels = lay.levels;
      o.forward.cfactor = o.backward.cfactor = lay.cfactor;
      o.forward.tolerance = o.backward.tolerance = 1e-12;
      o.forward.max_iterations = o.backward.max_iterations = 40;
      const int64_t lb = batch / data;
      LayerParallel<double> engine(net, grid, lb, o);
      // this replica's rows of the batch
      Tensor2<double> x("x", lb, c.inputs);
      Tensor1<int32_t> labels("labels", lb);
      Kokkos::deep_copy(
          x, Kokkos::subview(d.x, std::make_pair(grid.data_rank() * lb, (grid.data_rank() + 1) * lb), Kokkos::ALL));
      Kokkos::deep_copy(labels,
                        Kokkos::subview(d.labels, std::make_pair(grid.data_rank() * lb, (grid.data_rank() + 1) * lb)));
      const LayerParallelResult r = engine.forward_backward(x, labels, batch);
      INFO(lay.name << ", data " << data << " x layers " << layers);
      CHECK(r.forward.converged);
      CHECK(r.backward.converged);
      CHECK(r.loss == Approx(loss).epsilon(1e-10));
      // the gradients of every replica are the serial ones; assemble over the layer group
      std::vector<double> mine(size_t(serial.net.params().numel()), 0.0);
      const auto local = to_host<double>(net.params().grads());
      const auto& infos = net.params().infos();
      for (size_t i = 0; i < infos.size(); ++i)
        for (int64_t e = 0; e < infos[i].numel; ++e)
          mine[size_t(serial.net.params().infos()[i].offset + e)] = local[size_t(infos[i].offset + e)];
      MPI_Allreduce(MPI_IN_PLACE, mine.data(), int(mine.size()), MPI_DOUBLE, MPI_SUM, grid.pipeline().raw());
      const double err = rel_diff(mine, serial_grads);
      if (rank == 0)
        std::printf("layer-parallel driver (%s), data %d x layers %d: gradient rel diff %.2e\n", lay.name, data, layers,
                    err);
      CHECK(err < 1e-10);
    }
}

TEST_CASE("the MGRIT cost model counts the solver's steps and messages exactly, rank by rank", "[mpi][mgrit]") {
  const int n = world_size(), rank = world_rank();
  const int64_t batch = 2;
  for (const MgritCase& lay : kLayouts) {
    const ResNetConfig c = small_resnet(lay.steps);
    const Data d = make_data(c, batch);
    for (int levels = 1; levels <= lay.levels; ++levels)
      for (const bool fcf : {false, true}) {
        MgritOptions opt;
        opt.levels = levels;
        opt.cfactor = lay.cfactor;
        opt.fcf = fcf;
        opt.tolerance = 0;
        opt.max_iterations = 3;
        Parallel par(c, batch, opt, lay.bounds());
        const MgritStats st = par.forward(d);
        const MgritCost cost = mgrit_cost(par.mgrit.layout(), opt, 1.0, 0.25);
        INFO(lay.name << ", " << levels << " levels, " << (fcf ? "FCF" : "F") << ", " << n << " ranks, rank " << rank);
        REQUIRE(st.steps.size() == size_t(levels));
        for (int l = 0; l < levels; ++l) CHECK(st.steps[size_t(l)] == cost.steps[size_t(rank)][size_t(l)]);
        CHECK(st.messages == cost.messages[size_t(rank)]);
        if (levels == 1) CHECK(cost.time == Approx(double(c.steps) + 0.25 * (n - 1)));  // the chain through all ranks
      }
  }
}

TEST_CASE("the convolutional network: the layer-parallel driver to tolerance gives the serial gradients",
          "[mpi][mgrit]") {
  const int n = world_size(), rank = world_rank();
  ResNetConfig c;
  c.inputs = 16;  // 4 x 4 images, 2 channels, 3x3 convolutions
  c.channels = 2;
  c.steps = 16;
  c.classes = 3;
  c.t_final = 2.0;
  c.init_std = 0.5;
  c.step_init_std = 0.3;
  const int64_t batch = 3;
  const Data d = make_data(c, batch);
  const Serial serial(c, d);
  Layout pc;
  pc.pipeline = n;
  Grid grid(pc, MPI_COMM_WORLD);
  ResNet<double> net(c, 3, StagePlacement::balanced(int(c.steps), n, rank));
  attach_steps(net);
  LayerParallelOptions o;
  o.forward.levels = o.backward.levels = 2;
  o.forward.cfactor = o.backward.cfactor = 4;
  o.forward.tolerance = o.backward.tolerance = 1e-12;
  o.forward.max_iterations = o.backward.max_iterations = 40;
  LayerParallel<double> engine(net, grid, batch, o);
  const LayerParallelResult r = engine.forward_backward(d.x, d.labels, batch);
  CHECK(r.forward.converged);
  CHECK(r.backward.converged);
  CHECK(r.loss == Approx(serial.loss / double(batch)).epsilon(1e-10));
  const double err = rel_diff(global_grads(const_cast<ResNet<double>&>(serial.net), net), serial.grads);
  if (rank == 0) std::printf("convolutional layer-parallel on %d ranks: gradient rel diff %.2e\n", n, err);
  CHECK(err < 1e-10);
}
