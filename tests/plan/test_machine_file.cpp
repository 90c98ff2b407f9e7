// Machine files (src/plan/machine_file.hpp): a written file reads back the same; each
// malformed kind is refused with a line naming the file and the key; the shipped files
// (machines/*.toml, found through STRATA_MACHINES_DIR, which CTest sets) parse; and the
// alpha-beta fit recovers the costs it was given.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/deck.hpp"
#include "core/deck_reading.hpp"
#include "core/error.hpp"
#include "kernels/matmul_bf16.hpp"
#include "model/model_kind.hpp"
#include "plan/calibrate.hpp"
#include "plan/step_prediction.hpp"

using namespace strata;

namespace {

std::string write_machine_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("strata-machine-test-" + name + ".toml");
  std::ofstream(path) << text;
  return path.string();
}

MachineFile sample_machine() {
  MachineFile m;
  m.name = "box";
  m.description = "two \"cores\", one \\ node";
  m.source = "a test";
  m.ranks_per_node = 2;
  m.gemm_flops = 9.5e10;
  m.memory_bandwidth = 1.2e10;
  m.memory_capacity = 8e9;
  m.activation_rate = 3e9;
  m.adam_rate = 4e8;
  m.intra_node = {1e-6, 2e-10, 3e-6, 4e-10, 5e-6, 6e-10};
  return m;
}

std::string machine_file_error(const std::string& text) {
  const std::string path = write_machine_temp("bad", text);
  try {
    read_machine_file(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a machine file written by to_toml reads back the same", "[machine_file]") {
  MachineFile m = sample_machine();
  m.has_inter_node = true;
  m.inter_node = {7e-6, 8e-11, 9e-6, 1e-10, 2e-5, 3e-10};
  m.attention_flops = 6.1e10;
  m.bf16_attention_flops = 1.3e11;
  const MachineFile r = read_machine_file(write_machine_temp("roundtrip", to_toml(m)));
  CHECK(r.name == m.name);
  CHECK(r.source == m.source);
  CHECK(r.description == m.description);
  CHECK(r.ranks_per_node == 2);
  CHECK(r.gemm_flops == Approx(m.gemm_flops).epsilon(1e-3));
  CHECK(r.memory_bandwidth == Approx(m.memory_bandwidth).epsilon(1e-3));
  CHECK(r.memory_capacity == Approx(m.memory_capacity).epsilon(1e-3));
  CHECK(r.activation_rate == Approx(m.activation_rate).epsilon(1e-3));
  CHECK(r.adam_rate == Approx(m.adam_rate).epsilon(1e-3));
  CHECK(r.attention_rate(Precision::FP32) == Approx(6.1e10).epsilon(1e-3));
  CHECK(r.attention_rate(Precision::BF16) == Approx(1.3e11).epsilon(1e-3));
  CHECK(read_machine_file(write_machine_temp("no-attention", to_toml(sample_machine())))
            .attention_rate(Precision::FP32) == 0.0);  // optional: the planner then times attention at the GEMM rate
  CHECK(r.intra_node.allreduce_beta == Approx(4e-10).epsilon(1e-3));
  CHECK(r.inter_node.broadcast_alpha == Approx(2e-5).epsilon(1e-3));
  CHECK(r.has_inter_node);
  // costs: a ring all-reduce of 8 ranks on 1 MB
  CHECK(r.intra_node.seconds(Collective::AllReduce, 8, 1e6) == Approx(14 * 3e-6 + 1.75 * 1e6 * 4e-10));
  CHECK(r.intra_node.seconds(Collective::AllReduce, 1, 1e6) == 0.0);
  CHECK(r.intra_node.seconds(Collective::Send, 2, 1e6) == Approx(1e-6 + 1e6 * 2e-10));
}

TEST_CASE("the bf16 GEMM rate: read back, optional, and what a bf16 deck's GEMMs are costed at", "[machine_file]") {
  MachineFile m = sample_machine();
  CHECK(to_toml(m).find("bf16_gemm_flops") == std::string::npos);  // unknown: not written
  const MachineFile without = read_machine_file(write_machine_temp("no-bf16", to_toml(m)));
  CHECK(without.bf16_gemm_flops == 0.0);
  CHECK(without.gemm_rate(Precision::FP32) == Approx(m.gemm_flops).epsilon(1e-3));
  CHECK_THROWS_WITH(without.gemm_rate(Precision::BF16),
                    Catch::Contains("machine 'box' has no compute.bf16_gemm_flops"));
  m.bf16_gemm_flops = 2.2e11;
  const MachineFile with = read_machine_file(write_machine_temp("bf16", to_toml(m)));
  CHECK(with.gemm_rate(Precision::BF16) == Approx(2.2e11).epsilon(1e-3));

  // a bf16 deck on a machine whose bf16 rate equals its fp32 rate is the fp32 prediction;
  // a faster bf16 rate takes time off the GEMMs only
  const Deck fp32 = parse_model_deck(
      "[model]\nn_layer = 2\nn_embd = 64\nn_head = 4\nvocab_size = 256\nseq_len = 32\n"
      "[data]\nkind = \"random\"\nbatch_size = 8\n",
      "deck.toml", {});
  const Deck bf16 = parse_model_deck(
      "[model]\nn_layer = 2\nn_embd = 64\nn_head = 4\nvocab_size = 256\nseq_len = 32\n"
      "[data]\nkind = \"random\"\nbatch_size = 8\n",
      "deck.toml", {"model.precision=bf16"});
  MachineFile same = sample_machine(), faster = sample_machine();
  same.bf16_gemm_flops = same.gemm_flops;
  faster.bf16_gemm_flops = 4 * faster.gemm_flops;
  const Layout serial;
  const StepPrediction a = predict_step(fp32, serial, same), b = predict_step(bf16, serial, same);
  const StepPrediction c = predict_step(bf16, serial, faster);
  CHECK(b.step_s == a.step_s);
  CHECK(c.step_s < a.step_s);
  // a bf16 deck keeps its layer norms' and GELU's outputs as bf16, where products round
  // their operands in a pass of their own (the planner times the work per value: the same)
  if (kernels::RoundedCopy::pays())
    CHECK(c.activation_bytes < a.activation_bytes);
  else
    CHECK(c.activation_bytes == a.activation_bytes);
  CHECK_THROWS_WITH(predict_step(bf16, serial, sample_machine()), Catch::Contains("bf16_gemm_flops"));

  // a machine whose products round inside (GPUs: compute.bf16_rounding = "in_product")
  // keeps neither the weights' bf16 copy nor bf16 activations, whatever this build keeps
  MachineFile gpu = faster;
  gpu.bf16_rounds_in_product = true;
  const MachineFile gpu_read = read_machine_file(write_machine_temp("gpu", to_toml(gpu)));
  CHECK(gpu_read.bf16_rounds_in_product);
  CHECK_FALSE(read_machine_file(write_machine_temp("cpu", to_toml(faster))).bf16_rounds_in_product);
  const StepPrediction g = predict_step(bf16, serial, gpu_read);
  CHECK(g.activation_bytes == a.activation_bytes);
  CHECK(g.state_bytes == a.state_bytes);
  if (kernels::RoundedCopy::pays()) CHECK(c.state_bytes > a.state_bytes);  // the weight copy
  std::string bad = to_toml(gpu);
  bad.replace(bad.find("\"in_product\""), 12, "\"inside\"");
  CHECK_THROWS_WITH(read_machine_file(write_machine_temp("bad-rounding", bad)),
                    Catch::Contains("compute.bf16_rounding") && Catch::Contains("in_product"));
}

TEST_CASE("threads: the [threads] table reads back, and at_threads scales a rank's rates and memory by it",
          "[machine_file]") {
  MachineFile m = sample_machine();  // 2 ranks per node, measured with 1 thread each
  m.cores_per_node = 8;
  m.threads.counts = {1, 2};
  m.threads.gemm = {1.0, 1.8};
  m.threads.memory = {1.0, 1.5};
  const MachineFile r = read_machine_file(write_machine_temp("threads", to_toml(m)));
  CHECK(r.cores_per_node == 8);
  CHECK(r.threads_per_rank == 1);
  CHECK(r.threads.counts == std::vector<int>{1, 2});
  CHECK(r.threads.gemm == std::vector<double>{1.0, 1.8});
  CHECK(r.threads.bf16_gemm.empty());
  // measured at 2: 1.8; past it Amdahl's law with the serial share 1.8 implies (f = 1/9)
  CHECK(r.threads.speedup(r.threads.gemm, 2) == Approx(1.8));
  const double f = (2.0 / 1.8 - 1.0) / (2.0 - 1.0);
  CHECK(r.threads.speedup(r.threads.gemm, 8) == Approx(1.0 / (f + (1.0 - f) / 8.0)));
  const MachineFile four = r.at_threads(4);
  CHECK(four.ranks_per_node == 2);
  CHECK(four.threads_per_rank == 4);
  CHECK(four.gemm_flops == Approx(m.gemm_flops / (f + (1.0 - f) / 4.0)));
  const double g = (2.0 / 1.5 - 1.0);  // memory's serial share
  CHECK(four.memory_bandwidth == Approx(m.memory_bandwidth / (g + (1.0 - g) / 4.0)));
  CHECK(four.activation_rate == Approx(m.activation_rate / (g + (1.0 - g) / 4.0)));  // no activation row: memory's
  CHECK(four.memory_capacity == Approx(m.memory_capacity));                          // still 2 ranks per node
  const MachineFile eight = r.at_threads(8);  // one rank per node: the node's memory
  CHECK(eight.ranks_per_node == 1);
  CHECK(eight.memory_capacity == Approx(2 * m.memory_capacity));
  CHECK(r.at_threads(1).gemm_flops == Approx(m.gemm_flops));
  CHECK_THROWS_WITH(r.at_threads(3), Catch::Contains("has 8 cores per node: 3 threads per rank do not divide them"));
  // the elementwise kernels' own row, where calibrate measured it, scales the activation rate
  m.threads.activation = {1.0, 1.6};
  const MachineFile a = read_machine_file(write_machine_temp("threads-activation", to_toml(m)));
  CHECK(a.threads.activation == std::vector<double>{1.0, 1.6});
  const double h = (2.0 / 1.6 - 1.0);
  CHECK(a.at_threads(4).activation_rate == Approx(m.activation_rate / (h + (1.0 - h) / 4.0)));
  CHECK(a.at_threads(4).memory_bandwidth == Approx(four.memory_bandwidth));
  // a file without the table: linear in threads, and the node's cores are its ranks' threads
  const MachineFile plain = read_machine_file(write_machine_temp("no-threads", to_toml(sample_machine())));
  CHECK(plain.node_cores() == 2);
  CHECK(plain.at_threads(2).gemm_flops == Approx(2 * m.gemm_flops));
  // a malformed table is refused
  const std::string good = to_toml(sample_machine());
  CHECK_THAT(machine_file_error(good + "\n[threads]\ncounts = [2, 4]\ngemm = [1.0, 1.9]\nmemory = [1.0, 1.5]\n"),
             Catch::Contains("[threads] counts must start at 1"));
  CHECK_THAT(machine_file_error(good + "\n[threads]\ncounts = [1, 2]\ngemm = [1.0]\nmemory = [1.0, 1.5]\n"),
             Catch::Contains("one value per count"));
  CHECK_THAT(machine_file_error(good + "\n[threads]\ncounts = [1, 2]\ngemm = [1.0, 1.9]\nmemory = [1.0, 1.5]\n"
                                       "activation = [1.0]\n"),
             Catch::Contains("one value per count"));
}

TEST_CASE("malformed machine files are refused naming the file and the key", "[machine_file]") {
  const std::string good = to_toml(sample_machine());
  CHECK_THAT(machine_file_error(good + "\n[gpu]\nx = 1\n"), Catch::Contains("unknown section [gpu]"));
  std::string typo = good;
  typo.replace(typo.find("gemm_flops"), 10, "gemm_flop");
  CHECK_THAT(machine_file_error(typo), Catch::Contains("unknown key compute.gemm_flop"));
  std::string negative = good;
  negative.insert(negative.find("memory_bandwidth = ") + 19, "-");
  CHECK_THAT(machine_file_error(negative), Catch::Contains("compute.memory_bandwidth must be > 0"));
  CHECK_THAT(machine_file_error("[machine]\nname = \"x\"\n"), Catch::Contains("machine.description must be a string"));
  CHECK_THAT(machine_file_error("[machine\n"), Catch::Contains("is not valid TOML"));
  CHECK_THAT(machine_file_error(good.substr(0, good.find("[intra_node]"))), Catch::Contains("no [intra_node] section"));
  try {
    read_machine_file("/nonexistent/m.toml");
    FAIL("no error");
  } catch (const UserError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("cannot open machine file '/nonexistent/m.toml'"));
  }
}

TEST_CASE("the shipped machine files parse", "[machine_file]") {
  const char* dir = std::getenv("STRATA_MACHINES_DIR");
  if (!dir) {
    WARN("STRATA_MACHINES_DIR is not set: the shipped machine files are not checked");
    return;
  }
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    INFO(entry.path());
    const MachineFile m = read_machine_file(entry.path().string());
    CHECK(m.gemm_flops > 0);
    CHECK(m.intra_node.allreduce_beta > 0);
    ++files;
  }
  CHECK(files >= 2);
  const MachineFile h100 = read_machine_file(std::string(dir) + "/h100-dgx-cluster.toml");
  CHECK(h100.ranks_per_node == 8);
  CHECK(h100.has_inter_node);
  CHECK(1.0 / h100.inter_node.allreduce_beta < 50e9);  // below the 400 Gb/s line rate
}

TEST_CASE("the alpha-beta fit recovers the costs of exact samples", "[machine_file]") {
  std::vector<std::pair<double, double>> xt;
  for (double x = 8; x <= 16e6; x *= 4) xt.emplace_back(x, 3e-6 + x * 1.5e-10);
  const auto [a, b] = fit_alpha_beta(xt);
  CHECK(a == Approx(3e-6).epsilon(1e-9));
  CHECK(b == Approx(1.5e-10).epsilon(1e-9));
}
