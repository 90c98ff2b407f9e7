// MGRIT's convergence factor on the Fashion-MNIST residual network: for N steps, each
// coarsening factor c and F or FCF relaxation, a two-level (and a three-level) forward
// solve from a zero guess on a batch of test images, in double precision on one rank (the
// iterates do not depend on the rank count: tests/engine/test_mgrit.cpp). The factor is the
// mean ratio of successive residual norms over the iterations before the residual
// reaches 1e-10 (at most 12). Weights: the initialisation of inputs/resnet-fmnist-mgrit.toml
// (or --step-std), or a trained checkpoint of the same N (--checkpoint), whose weights are
// larger: |1 + c h lambda| grows with c h and the coarse steps can stop contracting.
//
// --channels C: the convolutional variant (3x3 convolutions, C channels; give --steps,
// e.g. 16). Combinations whose N is not a multiple of c^(levels-1) are left out.
//
//   build/release/bench/mgrit_convergence [--steps 64 256 1024] [--checkpoint FILE] [--step-std 0.01] [--t-final 4]
//                                         [--channels C]
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/model_checkpoint.hpp"
#include "comm/comm.hpp"
#include "engine/layer_parallel/ode_steps.hpp"
#include "io/image_dataset.hpp"
#include "model/resnet.hpp"
#include "model/resnet_steps.hpp"

using namespace strata;

int main(int argc, char** argv) {
  int provided = 0;  // Kokkos' and the BLAS's OpenMP threads never call MPI
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    std::vector<int64_t> steps_list = {64, 256, 1024};
    std::string checkpoint;
    double step_std = 0.01, t_final = 4.0;  // inputs/resnet-fmnist-mgrit.toml
    int64_t width = 64, batch = 100, channels = 0;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--steps") {
        steps_list.clear();
        while (i + 1 < argc && argv[i + 1][0] != '-') steps_list.push_back(std::atoll(argv[++i]));
      } else if (a == "--checkpoint" && i + 1 < argc) {
        checkpoint = argv[++i];
      } else if (a == "--step-std" && i + 1 < argc) {
        step_std = std::atof(argv[++i]);
      } else if (a == "--t-final" && i + 1 < argc) {
        t_final = std::atof(argv[++i]);
      } else if (a == "--channels" && i + 1 < argc) {
        channels = std::atoll(argv[++i]);
      } else {
        std::fprintf(stderr,
                     "usage: mgrit_convergence [--steps N...] [--checkpoint FILE] [--step-std S] [--t-final T] "
                     "[--channels C]\n");
        return 2;
      }
    }
    ImageDataset data("/usr/share/datasets/fashion-mnist", 1);
    Tensor2<double> x("x", batch, data.pixels());
    {
      auto hx = Kokkos::create_mirror_view(x);
      std::vector<float> img(size_t(data.pixels()));
      int32_t label = 0;
      for (int64_t i = 0; i < batch; ++i) {
        data.sample(Split::Validation, 0, batch, i, img.data(), &label);
        for (int64_t p = 0; p < data.pixels(); ++p) hx(i, p) = img[size_t(p)];
      }
      Kokkos::deep_copy(x, hx);
    }
    Comm self(MPI_COMM_SELF);
    std::printf("%s weights; batch %lld test images, %s, T = %g\n",
                checkpoint.empty() ? ("initial (step std " + std::to_string(step_std) + ")").c_str()
                                   : ("trained (" + checkpoint + ")").c_str(),
                (long long)batch,
                channels > 0 ? ("3x3 convolutions, " + std::to_string(channels) + " channels").c_str()
                             : ("width " + std::to_string(width)).c_str(),
                t_final);
    std::printf(
        "| N | c | relaxation | levels | iterations to 1e-10 | convergence factor | residual after 1, 2 iterations "
        "|\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    for (const int64_t n : steps_list) {
      ResNetConfig cfg;
      cfg.inputs = data.pixels();
      cfg.width = width;
      cfg.channels = channels;
      cfg.steps = n;
      cfg.t_final = t_final;
      cfg.init_std = 0.05;
      cfg.step_init_std = step_std;
      ResNet<double> net(cfg, 1);
      attach_steps(net);
      if (!checkpoint.empty()) {
        ResNet<float> trained(cfg, 1);
        read_model_checkpoint(checkpoint, trained.params());
        auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), trained.params().params());
        auto d = Kokkos::create_mirror_view(net.params().params());
        for (size_t i = 0; i < h.extent(0); ++i) d(i) = double(h(i));
        Kokkos::deep_copy(net.params().params(), d);
      }
      for (const int c : {2, 4, 8})
        for (const bool fcf : {false, true})
          for (const int levels : {2, 3}) {
            if (n % (levels == 2 ? c : c * c) != 0) continue;
            MgritOptions o;
            o.levels = levels;
            o.cfactor = c;
            o.fcf = fcf;
            o.tolerance = 1e-10;
            o.max_iterations = 12;
            OdeForwardSteps<double> app(*net.ode_network(), batch, c);
            Mgrit<double> mgrit(app, self, n, o);
            net.open_forward(x, app.as_state(mgrit.point(0)));
            mgrit.zero_guess();
            const MgritStats st = mgrit.solve();
            const auto r = st.residuals;
            std::printf("| %lld | %d | %s | %d | %s | %.3g | %.2e, %.2e |\n", (long long)n, c, fcf ? "FCF" : "F",
                        levels, st.converged ? std::to_string(st.iterations).c_str() : "> 12", st.convergence_factor(),
                        r.size() > 1 ? r[1] : 0.0, r.size() > 2 ? r[2] : 0.0);
          }
    }
  }
  MPI_Finalize();
  return 0;
}
