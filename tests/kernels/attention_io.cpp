// Runs strata's fused attention on inputs a test writes, for the PyTorch cross-check
// (check_attention_torch.py): reads DIR/qkv.bin (B*T, 3C) and DIR/dout.bin (B*T, C) as
// float64, runs the forward and backward in PRECISION (fp64, fp32 or bf16: the scalar
// type, and for bf16 the products' operands), and writes DIR/out.bin, DIR/lse.bin and
// DIR/dqkv.bin as float64.
// Usage: attention_io DIR B T H HS fp64|fp32|bf16
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/matmul_bf16.hpp"

using namespace strata;

namespace {

std::vector<double> read_bin(const std::string& path, size_t n) {
  std::vector<double> v(n);
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(double))))
    throw std::runtime_error("cannot read " + std::to_string(n) + " doubles from " + path);
  return v;
}

template <class T>
void write_bin(const std::string& path, const Tensor1<T>& d) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  std::vector<double> v(h.data(), h.data() + h.size());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 8));
}

template <class T>
Tensor1<T> to_device(const std::vector<double>& v) {
  Tensor1<T> d("in", v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (size_t i = 0; i < v.size(); ++i) h(i) = T(v[i]);
  Kokkos::deep_copy(d, h);
  return d;
}

template <class T>
void run(const std::string& dir, int64_t b, int64_t t, int64_t h, int64_t hs, Precision type) {
  const int64_t c = h * hs, n = b * t;
  const auto qkv = to_device<T>(read_bin(dir + "/qkv.bin", size_t(n * 3 * c)));
  const auto dout = to_device<T>(read_bin(dir + "/dout.bin", size_t(n * c)));
  Tensor1<T> out("out", n * c), lse("lse", b * h * t), dqkv("dqkv", n * 3 * c);
  const V2<const T> qkv2(qkv.data(), n, 3 * c);
  kernels::ProductWorkspace workspace;
  const kernels::ProductPrecision precision(type, true, &workspace);
  kernels::attention_forward<T>(V2<T>(out.data(), n, c), V2<T>(lse.data(), b * h, t), qkv2, b, t, h, precision);
  kernels::attention_backward<T>(V2<T>(dqkv.data(), n, 3 * c), qkv2, V2<const T>(out.data(), n, c),
                                 V2<const T>(lse.data(), b * h, t), V2<const T>(dout.data(), n, c), b, t, h, precision);
  write_bin(dir + "/out.bin", out);
  write_bin(dir + "/lse.bin", lse);
  write_bin(dir + "/dqkv.bin", dqkv);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: attention_io DIR B T H HS fp64|fp32|bf16\n");
    return 2;
  }
  Kokkos::ScopeGuard kokkos(argc, argv);
  const std::string dir = argv[1], precision = argv[6];
  const int64_t b = std::stoll(argv[2]), t = std::stoll(argv[3]), h = std::stoll(argv[4]), hs = std::stoll(argv[5]);
  if (precision == "fp64") {
    run<double>(dir, b, t, h, hs, Precision::FP32);
  } else if (precision == "fp32") {
    run<float>(dir, b, t, h, hs, Precision::FP32);
  } else if (precision == "bf16") {
    if (const std::string why = kernels::bf16_products_unavailable(); !why.empty()) {
      std::printf("bf16 unavailable: %s\n", why.c_str());
      return 77;  // skipped
    }
    run<float>(dir, b, t, h, hs, Precision::BF16);
  } else {
    std::fprintf(stderr, "attention_io: unknown precision %s\n", precision.c_str());
    return 2;
  }
  return 0;
}
