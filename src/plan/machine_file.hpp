#pragma once
// A machine as the planner sees it, read from and written to a TOML machine file
// (machines/*.toml; `strata calibrate` measures one):
//
//   [machine]  name, description, source (where the numbers come from), ranks_per_node,
//              cores_per_node (optional: the CPU cores of a node; ranks_per_node x
//              compute.threads_per_rank when left out)
//   [compute]  threads_per_rank (optional, 1 when left out: the threads each rank ran
//              when the rates below were measured; every rate is one rank's at that count),
//              gemm_flops (FLOP/s of one rank's float GEMM at the model's shapes),
//              bf16_gemm_flops (the same with bf16 operands and fp32 sums, model.precision
//              = "bf16"; optional: a machine without it cannot plan bf16 decks),
//              attention_flops, bf16_attention_flops (FLOP/s of one rank's fused attention,
//              forward and backward, at the model's shapes, counting the unmasked work as
//              GPT::attention_kernel_flops does; optional: without them the planner times
//              attention's products at the GEMM rate, the model's full T x T count),
//              bf16_rounding ("separate": the bf16 products round their operands in a
//              pass of their own, as oneDNN on CPUs does, so a bf16 deck with
//              model.bf16_round_once keeps the weights' bf16 copy and its product-only
//              activations in bf16; "in_product": they round inside the product, as cuBLAS
//              on GPUs does, and none of that is kept; optional, "separate" when left out),
//              memory_bandwidth (bytes/s one rank streams through elementwise kernels),
//              memory_capacity (bytes one rank may hold: its GPU's, or its share of the node's),
//              activation_rate (bytes of kept activations per second the non-GEMM work of a
//              forward and backward gets through: layernorm, GELU, softmax, copies),
//              adam_rate (parameters per second through an Adam-style pass over the
//              weights and moments: XPipe's weight prediction with its restore, measured;
//              the AdamW update, the same arithmetic),
//              int8_rate and powersgd_rate (optional: gradient values per second through
//              parallel.grad_compression's codec on one rank, the network left out: int8's
//              codes and the sum of two nodes' codes; PowerSGD's factors at r = 4 with
//              its error, the time growing with r; one thread, as the codecs run;
//              without them the planner leaves the codec's time out and says so)
//   [threads]  (optional) how one rank's rates grow with its threads, measured at
//              `counts` (1 first, rising): gemm, bf16_gemm (optional), memory (the streaming
//              rates: memory_bandwidth, activation_rate, adam_rate), each the speed-up over
//              one thread at those counts; attention scales as the products it is made of.
//   [intra_node] and [inter_node]: for each of send, allreduce, broadcast a latency
//              <kind>_alpha (s) and an inverse bandwidth <kind>_beta (s/byte), so that a
//              collective of p ranks takes steps(p) alpha + wire(p) bytes beta
//              (comm/wire_model.hpp); inter_node may be left out for one-node machines.
//
// Unknown keys and missing ones are errors naming the file and the key.
#include <string>
#include <vector>

#include "comm/wire_model.hpp"
#include "core/deck_choices.hpp"

namespace strata {

struct LinkCosts {
  double send_alpha = 0, send_beta = 0;
  double allreduce_alpha = 0, allreduce_beta = 0;
  double broadcast_alpha = 0, broadcast_beta = 0;
  // seconds for a collective of `ranks` ranks on `payload_bytes` bytes; all-gather and
  // reduce-scatter use the all-reduce costs (each is half a ring all-reduce), reduce
  // the broadcast ones
  double seconds(Collective kind, int ranks, double payload_bytes) const;
};

// Speed-ups of one rank's rates over one thread, at the measured thread counts.
struct ThreadScaling {
  std::vector<int> counts;                      // 1 first, rising; empty: not measured
  std::vector<double> gemm, bf16_gemm, memory;  // one value per count (bf16_gemm may be empty)
  std::vector<double> activation;               // the activation (non-GEMM) rate's; empty: memory's stands in
  // The speed-up at t threads of the series s: measured, between two measured counts
  // linear, past the largest count by Amdahl's law with the serial share its speed-up
  // implies; t itself without measurements.
  double speedup(const std::vector<double>& s, int t) const;
};

struct MachineFile {
  std::string name, description, source;
  int ranks_per_node = 1;
  int cores_per_node = 0;    // 0: ranks_per_node x threads_per_rank
  int threads_per_rank = 1;  // the threads behind [compute]'s per-rank rates
  ThreadScaling threads;
  double gemm_flops = 0, memory_bandwidth = 0, memory_capacity = 0, activation_rate = 0, adam_rate = 0;
  double bf16_gemm_flops = 0;                            // 0: not known
  double attention_flops = 0, bf16_attention_flops = 0;  // 0: not known
  double int8_rate = 0, powersgd_rate = 0;               // 0: not known
  bool bf16_rounds_in_product = false;                   // compute.bf16_rounding = "in_product"
  LinkCosts intra_node, inter_node;
  bool has_inter_node = false;

  // The product rate a deck of this precision gets; a bf16 deck on a machine file without
  // bf16_gemm_flops is a UserError naming the file's machine.
  double gemm_rate(Precision precision) const;
  // The fused attention's rate in that precision; 0 where the file does not give it.
  double attention_rate(Precision precision) const {
    return precision == Precision::BF16 ? bf16_attention_flops : attention_flops;
  }
  int node_cores() const { return cores_per_node > 0 ? cores_per_node : ranks_per_node * threads_per_rank; }
  // The machine as ranks of t threads each see it: every per-rank rate scaled from
  // threads_per_rank to t threads by the [threads] speed-ups, node_cores() / t ranks per
  // node, and each rank's memory its share of the node's. A UserError when t does not
  // divide the node's cores.
  MachineFile at_threads(int t) const;
};

MachineFile read_machine_file(const std::string& path);
std::string to_toml(const MachineFile& m);

}  // namespace strata
