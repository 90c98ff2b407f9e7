// The 3D (AxoNN) linear layers against a serial reference computed here in long double:
// an "in" linear (input features over X, output over Y) followed by an "out" linear (the
// groups swapped), as a block's qkv/proj or fc/fc_proj pair, forward and backward, on every
// X x Y x Z that divides the job (the remaining ranks are replicas computing the same).
// Each rank checks its own parts: the outputs' rows of its depth rank and columns of its
// group, its weight shards (row bands of its block: hyperslabs of the global weight) and
// bias parts.
#include <mpi.h>

#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "parallel/tp3d_linear.hpp"
#include "support/host_views.hpp"

using namespace strata;

namespace {

// The X, Y and Z groups of a 3D split of the world's ranks, tensor ranks consecutive
// (x fastest, then y, then z), one split per (x * y * z) consecutive ranks.
struct Groups3D {
  int nx, ny, nz, x, y, z;
  std::vector<MPI_Comm> raw;
  std::unique_ptr<Comm> gx, gy, gz;
  Groups3D(int nx_, int ny_, int nz_) : nx(nx_), ny(ny_), nz(nz_) {
    int world = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int t = rank % (nx * ny * nz), replica = rank / (nx * ny * nz);
    x = t % nx, y = t / nx % ny, z = t / (nx * ny);
    raw.resize(3);
    MPI_Comm_split(MPI_COMM_WORLD, (replica * ny + y) * nz + z, x, &raw[0]);
    MPI_Comm_split(MPI_COMM_WORLD, (replica * nx + x) * nz + z, y, &raw[1]);
    MPI_Comm_split(MPI_COMM_WORLD, (replica * nx + x) * ny + y, z, &raw[2]);
    gx = std::make_unique<Comm>(raw[0]);
    gy = std::make_unique<Comm>(raw[1]);
    gz = std::make_unique<Comm>(raw[2]);
  }
  ~Groups3D() {
    gx.reset(), gy.reset(), gz.reset();
    for (auto& c : raw) MPI_Comm_free(&c);
  }
  Linear3DGroups in_linear() const { return {*gx, *gy, *gz}; }   // input over X, output over Y
  Linear3DGroups out_linear() const { return {*gy, *gx, *gz}; }  // input over Y, output over X
};

using Mat = std::vector<long double>;

template <class T>
V2<const T> cmat(const Tensor1<T>& t, int64_t r, int64_t c) {
  return V2<const T>(t.data(), r, c);
}

// c (m, n) = a (m, k) b (k, n) + bias
Mat matmul(const Mat& a, const Mat& b, const Mat& bias, int64_t m, int64_t k, int64_t n) {
  Mat c(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      long double s = bias.empty() ? 0 : bias[size_t(j)];
      for (int64_t l = 0; l < k; ++l) s += a[size_t(i * k + l)] * b[size_t(l * n + j)];
      c[size_t(i * n + j)] = s;
    }
  return c;
}
Mat transpose(const Mat& a, int64_t m, int64_t n) {
  Mat t(a.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) t[size_t(j * m + i)] = a[size_t(i * n + j)];
  return t;
}
Mat column_sums(const Mat& a, int64_t m, int64_t n) {
  Mat s(size_t(n), 0.0L);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) s[size_t(j)] += a[size_t(i * n + j)];
  return s;
}

template <class T>
std::vector<T> to_type(const Mat& m) {
  return std::vector<T>(m.begin(), m.end());
}
template <class T>
Mat from_type(const std::vector<T>& v) {
  return Mat(v.begin(), v.end());
}

// Rows [r0, r0 + nr) and columns [c0, c0 + nc) of a row-major (., cols) matrix.
template <class T>
std::vector<T> block(const Mat& m, int64_t cols, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  std::vector<T> b(size_t(nr * nc));
  for (int64_t i = 0; i < nr; ++i)
    for (int64_t j = 0; j < nc; ++j) b[size_t(i * nc + j)] = T(m[size_t((r0 + i) * cols + c0 + j)]);
  return b;
}

// max |got - want| / max(1, max |want|)
template <class T>
double relative_error(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0, scale = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return worst / scale;
}

// Runs the pair on R rows, overlapped as a block runs it (each linear's block prefetched
// under the one before, the weight gradients' reduce-scatters left in flight) or not, and
// checks every part against the reference; returns them all, for comparing runs.
template <class T>
std::vector<T> check_pair(int nx, int ny, int nz, double tol, bool overlap = true, int64_t R = 12, int64_t C = 8) {
  Groups3D g(nx, ny, nz);
  const int64_t H = 16;  // rows R (over Z), model width C (over X), hidden H (over Y)
  const Mat X = from_type(test::random_vector<double>(size_t(R * C), 31));
  const Mat W1 = from_type(test::random_vector<double>(size_t(C * H), 32));
  const Mat B1 = from_type(test::random_vector<double>(size_t(H), 33));
  const Mat W2 = from_type(test::random_vector<double>(size_t(H * C), 34));
  const Mat B2 = from_type(test::random_vector<double>(size_t(C), 35));
  const Mat DY = from_type(test::random_vector<double>(size_t(R * C), 36));
  // the serial reference: h = x W1 + b1, y = h W2 + b2, and the backward from dy
  const Mat Hs = matmul(X, W1, B1, R, C, H), Y = matmul(Hs, W2, B2, R, H, C);
  const Mat DH = matmul(DY, transpose(W2, H, C), {}, R, C, H), DX = matmul(DH, transpose(W1, C, H), {}, R, H, C);
  const Mat DW2 = matmul(transpose(Hs, R, H), DY, {}, H, R, C), DW1 = matmul(transpose(X, R, C), DH, {}, C, R, H);
  const Mat DB2 = column_sums(DY, R, C), DB1 = column_sums(DH, R, H);

  auto l1 = g.in_linear(), l2 = g.out_linear();
  l1.overlap = l2.overlap = overlap;
  const int64_t r = R / nz, r0 = g.z * r, c = C / nx, c0 = g.x * c, h = H / ny, h0 = g.y * h;
  const auto to_dev = [](const std::vector<T>& v) { return test::to_device(v); };
  auto x = to_dev(block<T>(X, C, r0, r, c0, c)), dy = to_dev(block<T>(DY, C, r0, r, c0, c));
  auto w1 = to_dev(linear3d_shard_of<T>(l1, to_type<T>(W1), C, H));
  auto w2 = to_dev(linear3d_shard_of<T>(l2, to_type<T>(W2), H, C));
  auto b1 = to_dev(block<T>(B1, H, 0, 1, h0, h)), b2 = to_dev(block<T>(B2, C, 0, 1, c0, c));
  CHECK(int64_t(w1.extent(0)) == linear3d_shard_size(l1, C, H));
  CHECK(int64_t(w1.extent(0)) == C / (nx * nz) * (H / ny));

  Tensor1<T> hid("h", r * h), y("y", r * c), dh("dh", r * h), dx("dx", r * c);
  Tensor1<T> slots[4] = {Tensor1<T>("s0", c * h), Tensor1<T>("s1", c * h), Tensor1<T>("s2", c * h),
                         Tensor1<T>("s3", c * h)};
  Linear3DTransfers<T> transfers;
  transfers.attach(slots[0], slots[1], slots[2], slots[3]);
  Tensor1<T> dw1("dw1", w1.extent(0)), dw2("dw2", w2.extent(0)), db1("db1", h), db2("db2", c);
  const kernels::ProductPrecision fp(Precision::FP32);
  transfers.prefetch(l1, w1);
  transfers.prefetch(l2, w2);
  linear3d_forward<T>(l1, fp, test::mat(hid, r, h), cmat(x, r, c), w1, b1, transfers);
  linear3d_forward<T>(l2, fp, test::mat(y, r, c), cmat(hid, r, h), w2, b2, transfers);
  transfers.finish();
  transfers.prefetch(l2, w2);
  transfers.prefetch(l1, w1);
  linear3d_backward_input<T>(l2, fp, test::mat(dh, r, h), cmat(dy, r, c), w2, transfers);
  linear3d_backward_input<T>(l1, fp, test::mat(dx, r, c), cmat(dh, r, h), w1, transfers);
  transfers.finish();
  linear3d_backward_weight<T>(l2, fp, dw2, db2, cmat(dy, r, c), cmat(hid, r, h), transfers);
  linear3d_backward_weight<T>(l1, fp, dw1, db1, cmat(dh, r, h), cmat(x, r, c), transfers);
  transfers.finish();

  INFO("X x Y x Z = " << nx << " x " << ny << " x " << nz << " at (" << g.x << ", " << g.y << ", " << g.z << ")");
  CHECK(relative_error(test::to_host<T>(hid), block<T>(Hs, H, r0, r, h0, h)) <= tol);
  CHECK(relative_error(test::to_host<T>(y), block<T>(Y, C, r0, r, c0, c)) <= tol);
  CHECK(relative_error(test::to_host<T>(dh), block<T>(DH, H, r0, r, h0, h)) <= tol);
  CHECK(relative_error(test::to_host<T>(dx), block<T>(DX, C, r0, r, c0, c)) <= tol);
  CHECK(relative_error(test::to_host<T>(dw1), linear3d_shard_of<T>(l1, to_type<T>(DW1), C, H)) <= tol);
  CHECK(relative_error(test::to_host<T>(dw2), linear3d_shard_of<T>(l2, to_type<T>(DW2), H, C)) <= tol);
  CHECK(relative_error(test::to_host<T>(db1), block<T>(DB1, H, 0, 1, h0, h)) <= tol);
  CHECK(relative_error(test::to_host<T>(db2), block<T>(DB2, C, 0, 1, c0, c)) <= tol);
  std::vector<T> all;
  for (const auto* v : {&hid, &y, &dh, &dx, &dw1, &dw2, &db1, &db2}) {
    const auto part = test::to_host<T>(*v);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

// Every X x Y x Z with sides 1, 2 or 4 whose product divides the job's ranks.
std::vector<std::array<int, 3>> shapes() {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<std::array<int, 3>> out;
  for (int nx : {1, 2, 4})
    for (int ny : {1, 2, 4})
      for (int nz : {1, 2})
        if (world % (nx * ny * nz) == 0) out.push_back({nx, ny, nz});
  return out;
}

}  // namespace

TEST_CASE("3D linear pair: outputs, input gradients, weight shards and bias parts equal the serial layers",
          "[mpi][tensor_parallel][tp3d]") {
  for (const auto& [nx, ny, nz] : shapes()) {
    check_pair<double>(nx, ny, nz, 1e-12);
    check_pair<float>(nx, ny, nz, 1e-5);
  }
}

TEST_CASE("3D linear pair: overlapped transfers give the blocking schedule's bits", "[mpi][tensor_parallel][tp3d]") {
  // 1040 rows: the products are cut into pieces between transfers (rows; the weight
  // gradients' 256-row slices of their inner dimension), which must not change a bit
  for (const auto& [nx, ny, nz] : shapes()) {
    const auto on = check_pair<float>(nx, ny, nz, 1e-5, true, 1040),
               off = check_pair<float>(nx, ny, nz, 1e-5, false, 1040);
    INFO("X x Y x Z = " << nx << " x " << ny << " x " << nz);
    CHECK(on == off);
  }
}

TEST_CASE("3D linear pair: products cut along a long K give the uncut products' bits", "[mpi][tensor_parallel][tp3d]") {
  // a model width of 520 columns: the first linear's forward (N N) and the second's input
  // gradient (N T) have K = 520 / X > 256 and are cut while the other's gather is in flight
  for (const auto& [nx, ny, nz] : shapes()) {
    if (nz == 1 || nx > 2) continue;  // no gather in flight, or K = 130
    const auto on = check_pair<float>(nx, ny, nz, 1e-5, true, 12, 520),
               off = check_pair<float>(nx, ny, nz, 1e-5, false, 12, 520);
    INFO("X x Y x Z = " << nx << " x " << ny << " x " << nz);
    CHECK(on == off);
  }
}

TEST_CASE("3D linear: a weight the groups do not divide is refused naming the split", "[mpi][tensor_parallel][tp3d]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world % 2 != 0) return;
  Groups3D g(2, 1, 1);
  CHECK_THROWS_WITH(linear3d_shard_size(g.in_linear(), 7, 8),
                    Catch::Contains("a (7, 8) weight does not split over in 2 x depth 1 rows and out 1 columns"));
}
