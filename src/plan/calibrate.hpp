#pragma once
// `strata calibrate`: measures what the planner needs to know of this machine and writes
// it as a machine file (machine_file.hpp). Collective over the ranks of `world` (run it
// with the ranks of one node, one per core or GPU, or with those of 2 or more nodes):
//  - gemm_flops: one rank's float GEMM rate at the deck's model shapes (every linear layer
//    of a block and the head, time-weighted), with the trainer's probe; bf16_gemm_flops
//    the same with bf16 operands where bf16 products run here (left out otherwise);
//  - attention_flops (and bf16_attention_flops where bf16 products run): the fused
//    attention's forward and backward at the deck's shapes, on its unmasked work;
//  - memory_bandwidth: a streaming triad on 3 x 64 MiB;
//  - activation_rate: a one-layer model of the deck's shapes runs forward and backward;
//    the time its products (at the two rates above) do not explain, per byte of the
//    activations it keeps;
//  - adam_rate: XPipe's weight prediction and restore on that model's parameters (the
//    planner costs the AdamW update with it too);
//  - int8_rate and powersgd_rate: parallel.grad_compression's codecs (int8 codes; PowerSGD
//    at r = 4) on that model's gradients, the network left out;
//  - send, all-reduce and broadcast through strata's own Comm at payloads from 8 B to
//    8 MiB (4x apart), each fitted to t = steps(p) alpha + wire(p) bytes beta
//    (comm/wire_model.hpp) by least squares in relative error; send is timed as half a
//    ping-pong of a group's first two ranks. [intra_node] is timed over the ranks of each
//    node, and on 2 or more nodes (comm/node_map.hpp) [inter_node] over the ranks of one
//    node-local index, one per node: every node, and every index, measures at once, as a
//    run's groups communicate at once; the first node's (the first index's) numbers are
//    written. ranks_per_node is the fullest node's rank count.
// The rates above (not the link costs, each already the best of 3, nor the [threads]
// table's ratios) are measured `repeats` times in turn and the best is kept: a busy minute
// only slows a measurement, so the fastest is the machine's. Each rate's spread over the
// repeats, and the share of the node's core time that other processes used meanwhile,
// say whether the node was quiet (the command refuses to write from a noisy one).
// With one rank there is nothing to time: the link costs are left at zero and the file
// says so in its source line; with one rank per node, the intra-node ones are left at zero.
#include <string>
#include <vector>

#include "comm/mpi_handle.hpp"
#include "core/deck.hpp"
#include "plan/machine_file.hpp"

namespace strata {

struct CommSample {
  std::string kind;    // "intra send", "inter allreduce", ...: the level and the collective
  double bytes = 0;    // payload
  double seconds = 0;  // measured
  double fitted = 0;   // the fit's prediction
};

// One rate over the repeats, the ranks' mean in each.
struct RepeatedRate {
  std::string name;  // the machine file's key
  double best = 0, worst = 0;
  double spread() const { return best > 0 ? (best - worst) / best : 0.0; }
};

struct Calibration {
  MachineFile machine;
  std::vector<CommSample> samples;
  std::vector<std::pair<std::string, double>> gemm;  // shape "m x k x n" -> GFLOP/s, the best repeat
  std::vector<RepeatedRate> repeated;
  int repeats = 0;
  // the share of the node's core time (cores_per_node x the measurement's seconds) that
  // other processes than strata's ranks used while it measured; < 0 where the node's CPU
  // time cannot be read (no /proc/stat). The same on every rank, as are the rates.
  double other_load = -1;
};

// Least squares in relative error of t = a + b x over (x, t) pairs; a >= 0.
std::pair<double, double> fit_alpha_beta(const std::vector<std::pair<double, double>>& x_t);

Calibration calibrate(const Deck& deck, MPI_Comm world, const std::string& name, int repeats = 5);

}  // namespace strata
