#include "plan/calibrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <exception>
#include <memory>

#include "comm/comm.hpp"
#include "comm/control.hpp"
#include "comm/int8_across.hpp"
#include "comm/node_map.hpp"
#include "comm/powersgd_across.hpp"
#include "core/cpu_time.hpp"
#include "core/log.hpp"
#include "core/rank_threads.hpp"
#include "core/timers.hpp"
#include "kernels/attention.hpp"
#include "kernels/gelu.hpp"
#include "kernels/gemm_probe.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/residual.hpp"
#include "model/gpt.hpp"
#include "model/make_model.hpp"
#include "model/model_kind.hpp"
#include "optim/weight_prediction.hpp"
#include "optim/zero_sharding.hpp"
#include "plan/stage_costs.hpp"
#if defined(KOKKOS_ENABLE_OPENMP)  // (Kokkos' configuration, from the headers above)
#include <omp.h>
#endif

namespace strata {

std::pair<double, double> fit_alpha_beta(const std::vector<std::pair<double, double>>& x_t) {
  // minimise sum ((a + b x - t) / t)^2: weighted normal equations, weights 1/t^2
  double s1 = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (const auto& [x, t] : x_t) {
    const double w = 1.0 / (t * t);
    s1 += w;
    sx += w * x;
    sxx += w * x * x;
    st += w * t;
    sxt += w * x * t;
  }
  const double det = s1 * sxx - sx * sx;
  double a = (st * sxx - sx * sxt) / det, b = (s1 * sxt - sx * st) / det;
  if (a < 0) {  // latency below resolution: fit the slope alone
    a = 0;
    b = sxt / sxx;
  }
  return {a, b};
}

namespace {

// Seconds per call of f: the fastest of 5 timings, each of as many calls as fill `window`
// seconds (one warm-up call first, which also sizes them): a kernel of microseconds timed
// alone moved 2-4x between repeats on a quiet VM.
template <class F>
double fastest_seconds_per_call(F f, double window = 0.02) {
  double t0 = Timers::now();
  f();
  Kokkos::fence();
  const int64_t calls = std::clamp<int64_t>(int64_t(window / std::max(1e-7, Timers::now() - t0)), 1, 100000);
  double best = 1e30;
  for (int timing = 0; timing < 5; ++timing) {
    t0 = Timers::now();
    for (int64_t i = 0; i < calls; ++i) f();
    Kokkos::fence();
    best = std::min(best, (Timers::now() - t0) / double(calls));
  }
  return best;
}

// Streaming bytes/s of one rank on `threads` OpenMP threads (a triad over 64 MiB arrays,
// each thread touching its own part first), for the [threads] table's memory speed-ups;
// 0 in builds without OpenMP.
double openmp_triad(int threads) {
  double best = 0;
#if defined(KOKKOS_ENABLE_OPENMP)
  const int64_t n = int64_t(16) << 20;
  std::unique_ptr<float[]> a(new float[size_t(n)]), b(new float[size_t(n)]), c(new float[size_t(n)]);
  float *pa = a.get(), *pb = b.get(), *pc = c.get();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) pa[i] = 0.0f, pb[i] = 1.0f, pc[i] = 2.0f;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = Timers::now();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + 0.5f * pc[i];
    const double dt = Timers::now() - t0;
    if (rep > 0) best = std::max(best, 3.0 * double(n) * sizeof(float) / dt);
  }
#else
  (void)threads;
#endif
  return best;
}

// Runs f() with the rank's Kokkos kernels and products on c of its threads: a one-thread
// region around a Kokkos partition of c threads (the pool itself is fixed once Kokkos
// starts), nested parallelism allowed for its length. Builds without OpenMP run f as is.
template <class F>
void on_threads(int c, const F& f) {
#if defined(KOKKOS_ENABLE_OPENMP)
  if (c == rank_threads()) return f();  // the pool as it is
  const int levels = omp_get_max_active_levels();
  omp_set_max_active_levels(2);
  std::exception_ptr error;
  Kokkos::OpenMP::partition_master(
      [&](int, int) {
        try {
          ProductThreads scope(c);
          f();
        } catch (...) {
          error = std::current_exception();
        }
      },
      1, c);
  omp_set_max_active_levels(levels);
  if (error) std::rethrow_exception(error);
#else
  (void)c;
  f();
#endif
}

// Seconds of the block's elementwise kernels on one micro-batch of the deck's shapes
// (layernorm and GELU forward and backward, a residual add): the best of 4. The [threads]
// table's activation row is their speed-up; timed directly, since the one-layer model's
// non-GEMM share (activation_rate) is too small a difference to compare across counts.
double elementwise_seconds(const Deck& deck) {
  const int64_t c = deck.model.n_embd;
  const int64_t rows = std::min<int64_t>(
      2048, std::max<int64_t>(1, deck.data.batch_size / deck.parallel.data / deck.parallel.micro_batches) *
                deck.model.seq_len);
  Tensor2<float> x("calibrate.x", rows, c), y("calibrate.y", rows, c), dx("calibrate.dx", rows, c);
  Tensor1<float> mean("calibrate.mean", rows), rstd("calibrate.rstd", rows), w("calibrate.w", c), b("calibrate.b", c);
  Tensor1<float> dw("calibrate.dw", c), db("calibrate.db", c), h("calibrate.h", rows * 4 * c),
      g("calibrate.g", rows * 4 * c);
  Kokkos::deep_copy(w, 1.0f);
  Kokkos::parallel_for(
      "calibrate_x", Range(0, rows * c),
      KOKKOS_LAMBDA(const int64_t i) { x.data()[i] = 0.01f * float(i % 193) - 0.9f; });
  Kokkos::parallel_for(
      "calibrate_h", Range(0, rows * 4 * c), KOKKOS_LAMBDA(const int64_t i) { h(i) = 0.02f * float(i % 89) - 0.8f; });
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = Timers::now();
    kernels::layernorm_forward<float>(y, mean, rstd, x, w, b);
    kernels::gelu_forward<float>(g, h);
    kernels::gelu_backward<float>(g, h, g);
    kernels::layernorm_backward<float>(dx, dw, db, y, x, w, mean, rstd, false);
    kernels::residual_accumulate<float>(V1<float>(dx.data(), rows * c), V1<const float>(x.data(), rows * c));
    Kokkos::fence();
    if (rep > 0) best = std::min(best, Timers::now() - t0);
  }
  return best;
}

// Rates at rising thread counts as speed-ups over the first, the ranks' mean.
std::vector<double> speedups(Comm& comm, std::vector<double> rates) {
  const double one = rates.empty() ? 0.0 : rates[0];
  for (double& x : rates) x = comm.allreduce_sum(one > 0 ? x / one : 1.0) / comm.size();
  return rates;
}

// The [threads] table: one rank's product and streaming rates at 1, 2, 4, ... and its own
// thread count, over their rates on one thread (the ranks' mean).
ThreadScaling measure_thread_scaling(const Deck& deck, Comm& comm, bool bf16) {
  ThreadScaling s;
  const int threads = rank_threads();
  for (int c = 1; c < threads; c *= 2) s.counts.push_back(c);
  s.counts.push_back(threads);
  s.counts.erase(std::unique(s.counts.begin(), s.counts.end()), s.counts.end());
  for (const int c : s.counts) {
    ProductThreads scope(c);
    s.gemm.push_back(model_gemm_rate(deck, Precision::FP32, 0.1));
    if (bf16) s.bf16_gemm.push_back(model_gemm_rate(deck, Precision::BF16, 0.1));
    s.memory.push_back(openmp_triad(c));
    if (is_gpt(deck.model)) on_threads(c, [&] { s.activation.push_back(1.0 / elementwise_seconds(deck)); });
  }
  for (auto* v : {&s.gemm, &s.bf16_gemm, &s.memory, &s.activation}) *v = speedups(comm, *v);
  return s;
}

double triad_bandwidth() {
  const int64_t n = int64_t(64) << 18;  // 64 MiB of floats per array
  Tensor1<float> a("triad.a", n), b("triad.b", n), c("triad.c", n);
  Kokkos::deep_copy(b, 1.0f);
  Kokkos::deep_copy(c, 2.0f);
  const double seconds = fastest_seconds_per_call(
      [&] {
        Kokkos::parallel_for(
            "triad", Range(0, n), KOKKOS_LAMBDA(const int64_t i) { a(i) = b(i) + 0.5f * c(i); });
      },
      0.05);
  return 3.0 * double(n) * sizeof(float) / seconds;
}

// A one-layer model of the deck's shapes on this rank alone (make_model), for the two
// rates below.
std::unique_ptr<GPT<float>> one_layer(const Deck& deck) {
  Deck one = deck;
  one.model.n_layer = 1;
  one.parallel = Layout{};
  return as_gpt(make_model(one));
}

// FLOP/s of the fused attention, forward and backward, at the deck's shapes (one rank's
// micro-batch of sequences, at most 2048 tokens as the GEMM probe; all heads), counted as
// GPT::attention_kernel_flops counts it.
double attention_flops(const Deck& deck, Precision type) {
  const int64_t t = deck.model.seq_len, h = deck.model.n_head, c = deck.model.n_embd;
  const int64_t local = std::max<int64_t>(1, deck.data.batch_size / deck.parallel.data / deck.parallel.micro_batches);
  const int64_t b = std::clamp<int64_t>(2048 / t, 1, local), rows = b * t;
  Tensor2<float> qkv("calibrate.qkv", rows, 3 * c), out("calibrate.out", rows, c), lse("calibrate.lse", b * h, t);
  Tensor2<float> dqkv("calibrate.dqkv", rows, 3 * c);
  Kokkos::parallel_for(
      "calibrate_qkv", Range(0, rows * 3 * c),
      KOKKOS_LAMBDA(const int64_t i) { qkv.data()[i] = 0.02f * float(i % 97) - 0.9f; });
  kernels::ProductWorkspace workspace;  // as the model's: Q, K, V rounded once per pass
  const kernels::ProductPrecision precision(type, true, &workspace);
  const double best = fastest_seconds_per_call([&] {
    kernels::attention_forward<float>(out, lse, qkv, b, t, h, precision);
    kernels::attention_backward<float>(dqkv, qkv, out, lse, out, b, t, h, precision);
  });
  return 6.0 * double(t + 1) * double(c) * double(rows) / best;
}

// The one-layer model's micro-batch: the deck's, one rank's share.
BlockContext micro_batch(const Deck& deck) {
  return {std::max<int64_t>(1, deck.data.batch_size / deck.parallel.data / deck.parallel.micro_batches),
          deck.model.seq_len};
}

// Seconds of the one-layer model's forward and backward on the deck's micro-batch.
double forward_backward_seconds(const Deck& deck, GPT<float>& model) {
  const BlockContext ctx = micro_batch(deck);
  Tensor1<int32_t> tokens("calibrate.tokens", ctx.rows());
  const int64_t vocab = deck.model.vocab_size;  // token ids: the real vocabulary, not its padding
  Kokkos::parallel_for(
      "calibrate_tokens", Range(0, ctx.rows()),
      KOKKOS_LAMBDA(const int64_t i) { tokens(i) = int32_t((i * 7919) % vocab); });
  return fastest_seconds_per_call([&] {
    model.params().zero_grads();
    model.forward(ctx, tokens, tokens);
    model.backward(ctx, 1.0f / float(ctx.rows()));
  });
}

// Bytes of kept activations per second that the model's non-GEMM work gets through
// (layernorms, GELU, residual adds, copies, the cross-entropy): of the one-layer model's
// forward and backward (`seconds`), what its products do not explain (the dense ones at
// the GEMM rate, attention at its own: product_seconds) set against the activation bytes
// it keeps. The planner times every stage with the same rates.
double activation_rate(const Deck& deck, const GPT<float>& model, double seconds, const MachineFile& rates) {
  const BlockContext ctx = micro_batch(deck);
  const double rest = std::max(0.05 * seconds, seconds - product_seconds(model, ctx, rates, Precision::FP32));
  return double(model.memory_for(ctx).cache) / rest;
}

// Parameters per second through XPipe's weight prediction and its restore (an Adam-style
// pass over weights and moments), on the one-layer model's parameters.
double adam_rate(const Deck& deck, GPT<float>& model) {
  auto& store = model.params();
  Kokkos::deep_copy(store.zero().adam_m(), 1e-3f);
  Kokkos::deep_copy(store.zero().adam_v(), 1e-6f);
  WeightPredictor<float> predictor(deck.optim);
  const double best = fastest_seconds_per_call([&] {
    predictor.predict(store, deck.optim.lr, {1, 10});
    predictor.restore(store);
  });
  return double(store.numel()) / best;
}

// Gradient values per second through the int8 codec on one rank, the network left out:
// the codes of the one-layer model's gradients (values of every size) and the sum of two
// nodes' codes.
double int8_rate(const GPT<float>& model) {
  const int64_t n = model.params().numel();
  std::vector<float> x(static_cast<size_t>(n)), kept(x.size()), sum(x.size());
  std::vector<float> scales(static_cast<size_t>((n + Int8Across::kChunk - 1) / Int8Across::kChunk));
  std::vector<int8_t> q(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(double(i))) * 1e-3f;
  const double best = fastest_seconds_per_call([&] {
    quantize_int8(x.data(), n, q.data(), scales.data(), kept.data());
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int node = 0; node < 2; ++node) add_dequantized(q.data(), scales.data(), n, sum.data());
  });
  return double(n) / best;
}

// ... and through PowerSGD at r = 4: its plan of the model's gradient matrices, each piece
// projected, orthonormalized, back, and expanded with its error.
double powersgd_rate(const GPT<float>& model) {
  const auto& store = model.params();
  const int64_t n = store.numel();
  const int r = 4;
  const LowRankPlan plan = plan_low_rank(gradient_matrices(store), 0, n, r);
  std::vector<float> x(static_cast<size_t>(n)), out(x.size()), kept(x.size());
  std::vector<float> p(static_cast<size_t>(plan.p_values)), q(static_cast<size_t>(plan.q_values));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(double(i))) * 1e-3f;
  for (size_t i = 0; i < q.size(); ++i) q[i] = float(std::cos(double(i)));
  const double best = fastest_seconds_per_call([&] {
    int64_t po = 0, qo = 0;
    for (const MatrixSpan& s : plan.pieces) {
      low_rank_project(x.data() + s.offset, s.rows, s.cols, q.data() + qo, r, p.data() + po);
      orthonormalize_columns(p.data() + po, s.rows, r);
      low_rank_back(x.data() + s.offset, s.rows, s.cols, p.data() + po, r, q.data() + qo);
      low_rank_expand(x.data() + s.offset, s.rows, s.cols, p.data() + po, q.data() + qo, r, 2, out.data() + s.offset,
                      kept.data() + s.offset);
      po += s.rows * r;
      qo += s.cols * r;
    }
  });
  return double(n) / best;
}

// the best of 3 batches of `iters` calls of f, per call (barrier between batches)
template <class F>
double per_call(Comm& comm, int iters, F f) {
  double best = 1e30;
  f();  // warm-up
  for (int batch = 0; batch < 3; ++batch) {
    comm.barrier();
    const double t0 = Timers::now();
    for (int i = 0; i < iters; ++i) f();
    double dt = (Timers::now() - t0) / iters;
    dt = comm.allreduce_max(dt);
    best = std::min(best, dt);
  }
  return best;
}

// Send (half a ping-pong of ranks 0 and 1), all-reduce and broadcast over comm at payloads
// from 8 B to 8 MiB, each fitted to steps(p) alpha + wire(p) bytes beta; the samples named
// "<level> <kind>". Collective over comm.
void measure_link(Comm& comm, const char* level, LinkCosts& out, std::vector<CommSample>& samples) {
  const int p = comm.size(), rank = comm.rank();
  std::vector<std::pair<double, double>> send, allreduce, broadcast;
  std::vector<float> host(size_t(4) << 20);
  Tensor1<float> dev("calibrate.buf", int64_t(4) << 20);
  for (int64_t bytes = 8; bytes <= (int64_t(8) << 20); bytes *= 4) {
    const int64_t n = bytes / int64_t(sizeof(float));
    const int iters = int(std::clamp<int64_t>((int64_t(8) << 20) / (bytes + 4096), 4, 2000));
    const double pingpong = per_call(comm, iters, [&] {
      if (rank == 0) {
        Comm::Request s = comm.start_send(host.data(), n, 1, 7);
        comm.wait(s, "send");
        Comm::Request r = comm.start_recv(host.data(), n, 1, 8);
        comm.wait(r, "recv");
      } else if (rank == 1) {
        Comm::Request r = comm.start_recv(host.data(), n, 0, 7);
        comm.wait(r, "recv");
        Comm::Request s = comm.start_send(host.data(), n, 0, 8);
        comm.wait(s, "send");
      }
    });
    send.emplace_back(double(bytes), pingpong / 2);
    auto view = Kokkos::subview(dev, std::make_pair(int64_t(0), n));
    allreduce.emplace_back(double(bytes), per_call(comm, iters, [&] { comm.allreduce_sum(V1<float>(view)); }));
    broadcast.emplace_back(double(bytes), per_call(comm, iters, [&] { comm.broadcast(host.data(), bytes, 0); }));
  }
  auto fit = [&](const char* kind, Collective k, const std::vector<std::pair<double, double>>& xt, double& alpha,
                 double& beta) {
    const auto [a, b] = fit_alpha_beta(xt);
    alpha = a / latency_steps(k, p);
    beta = b / wire_factor(k, p);
    for (const auto& [x, t] : xt)
      samples.push_back({std::string(level) + " " + kind, x, t, collective_seconds(k, p, x, alpha, beta)});
  };
  fit("send", Collective::Send, send, out.send_alpha, out.send_beta);
  fit("allreduce", Collective::AllReduce, allreduce, out.allreduce_alpha, out.allreduce_beta);
  fit("broadcast", Collective::Broadcast, broadcast, out.broadcast_alpha, out.broadcast_beta);
}

}  // namespace

Calibration calibrate(const Deck& deck, MPI_Comm world, const std::string& name, int repeats) {
  Comm comm(world);
  const int p = comm.size();
  const NodeGroups groups(world);
  Comm node(groups.node()), across(groups.across());
  const int node_size = max_over(world, node.size());  // the fullest node's ranks
  Calibration cal;
  MachineFile& m = cal.machine;
  m.name = name;
  m.ranks_per_node = node_size;
  m.threads_per_rank = rank_threads();
  m.cores_per_node = cores_online();

  // the node's busy time and the ranks' own, from here to the end of the measurements
  comm.barrier();
  const double start = Timers::now(), node_start = node_busy_cpu_seconds(), own_start = process_cpu_seconds();

  const bool bf16 = kernels::bf16_products_unavailable().empty();
  const bool gpt = is_gpt(deck.model);
  const auto model = gpt ? one_layer(deck) : nullptr;
  double forward_backward_speed = 0;  // the one-layer model's forward and backward per second, the fastest repeat
  cal.repeats = std::max(1, repeats);
  for (int round = 0; round < cal.repeats; ++round) {
    // each rate the ranks' mean this round, the best round kept
    const auto keep = [&](const char* key, double& into, double value) {
      value = comm.allreduce_sum(value) / p;
      auto it = std::find_if(cal.repeated.begin(), cal.repeated.end(), [&](const auto& r) { return r.name == key; });
      if (it == cal.repeated.end()) {
        cal.repeated.push_back({key, value, value});
      } else {
        it->best = std::max(it->best, value);
        it->worst = std::min(it->worst, value);
      }
      into = std::max(into, value);
    };
    std::vector<std::pair<std::string, double>> shapes;
    keep("gemm_flops", m.gemm_flops, model_gemm_rate(deck, Precision::FP32, 0.1, INT64_MAX, &shapes));
    if (bf16)
      keep("bf16_gemm_flops", m.bf16_gemm_flops, model_gemm_rate(deck, Precision::BF16, 0.1, INT64_MAX, &shapes));
    if (cal.gemm.empty()) cal.gemm = shapes;
    for (size_t i = 0; i < shapes.size(); ++i) cal.gemm[i].second = std::max(cal.gemm[i].second, shapes[i].second);
    keep("memory_bandwidth", m.memory_bandwidth, triad_bandwidth());
    if (gpt) {
      keep("attention_flops", m.attention_flops, attention_flops(deck, Precision::FP32));
      if (bf16) keep("bf16_attention_flops", m.bf16_attention_flops, attention_flops(deck, Precision::BF16));
      keep("one-layer forward + backward", forward_backward_speed, 1.0 / forward_backward_seconds(deck, *model));
      keep("adam_rate", m.adam_rate, adam_rate(deck, *model));
      keep("int8_rate", m.int8_rate, int8_rate(*model));
      keep("powersgd_rate", m.powersgd_rate, powersgd_rate(*model));
    }
  }
  if (bf16) m.bf16_rounds_in_product = !kernels::RoundedCopy::pays();
#if !defined(KOKKOS_ENABLE_CUDA)
  m.threads = measure_thread_scaling(deck, comm, bf16);
#endif
  if (gpt) {
    m.activation_rate = activation_rate(deck, *model, 1.0 / forward_backward_speed, m);
  } else {  // the planner plans GPTs: rough streaming estimates, and the source line says so
    m.activation_rate = m.memory_bandwidth / 6;
    m.adam_rate = m.memory_bandwidth / 32;
  }
  m.memory_capacity =
      double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)) / m.ranks_per_node;  // the node's, shared

  // the links: among the ranks of a node, and (on 2 or more nodes) between the ranks of
  // one node-local index on every node; each node (each index) measures at once, as a
  // run's groups communicate at once, and rank 0's groups give the file's numbers
  if (node_size > 1) measure_link(node, "intra", m.intra_node, cal.samples);
  if (groups.nodes() > 1) {
    measure_link(across, "inter", m.inter_node, cal.samples);
    m.has_inter_node = true;
  }
  for (LinkCosts* c : {&m.intra_node, &m.inter_node})
    for (double* x : {&c->send_alpha, &c->send_beta, &c->allreduce_alpha, &c->allreduce_beta, &c->broadcast_alpha,
                      &c->broadcast_beta})
      *x = broadcast_value(world, *x, 0);
  comm.barrier();
  const double own = comm.allreduce_sum(process_cpu_seconds() - own_start);
  const double node_end = node_busy_cpu_seconds(), seconds = Timers::now() - start;
  if (node_start >= 0 && node_end >= 0 && seconds > 0)
    cal.other_load = std::max(0.0, (node_end - node_start - own) / (seconds * double(m.cores_per_node)));
  cal.other_load = broadcast_value(world, cal.other_load, 0);  // rank 0's reading of the node

  char when[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d", std::gmtime(&now));
  m.description =
      groups.nodes() > 1 ? strfmt("%d ranks on %d nodes", p, groups.nodes()) : strfmt("%d ranks on one node", p);
  m.source = strfmt("measured by `strata calibrate` on %s (%d ranks, model %s, C = %lld)%s", when, p,
                    deck.model.kind.c_str(), (long long)(gpt ? deck.model.n_embd : deck.model.width),
                    p > 1 ? "" : "; one rank: no link costs measured");
  if (!gpt)
    m.source += "; not a GPT deck: activation_rate and adam_rate are streaming estimates, attention not measured";
  return cal;
}

}  // namespace strata
