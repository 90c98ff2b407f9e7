#pragma once
// matmul_bf16.cpp's pieces (included there alone): the stack of bf16 buffers a product's
// rounded operands live in, and in CPU builds with oneDNN the cache of oneDNN primitives,
// one per product shape, that round the operands and multiply them.
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#ifdef STRATA_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace strata::kernels::bf16_detail {

// What a buffer of n values takes on the stack: n rounded up to 32, buffers 64 bytes apart
// (ProductWorkspace::stack_elements says the same to the models' predictions).
inline int64_t stack_elements(int64_t n) { return (n + 31) / 32 * 32; }

// A stack of bf16 buffers (2-byte elements, buffers 64 bytes apart): the operands a pass
// or a product rounds, taken and given back in nested order. It grows to the most ever in
// use at once and keeps that; an outgrown block lives on until the buffers in it are
// given back (the first step only).
class Bf16Stack {
 public:
  uint16_t* take(int64_t n) {
    const int64_t end = top_ + stack_elements(n);
    if (end > capacity_) {
      if (block_) outgrown_.emplace_back(capacity_, std::move(block_));
      block_.reset(new uint16_t[size_t(end)]);
      capacity_ = end;
    }
    taken_.emplace_back(block_.get() + top_, top_);
    top_ = end;
    return taken_.back().first;
  }
  void give_back(const uint16_t* at) {
    if (taken_.empty() || taken_.back().first != at) {
      std::fprintf(stderr, "strata: bf16 operand buffers given back out of order (a bug)\n");
      std::abort();
    }
    top_ = taken_.back().second;
    taken_.pop_back();
    if (taken_.empty()) outgrown_.clear();
  }
  int64_t bytes() const {
    int64_t n = capacity_;
    for (const auto& o : outgrown_) n += o.first;
    return n * int64_t(sizeof(uint16_t));
  }

 private:
  std::unique_ptr<uint16_t[]> block_;
  int64_t capacity_ = 0, top_ = 0;
  std::vector<std::pair<uint16_t*, int64_t>> taken_;  // each buffer, and the top before it
  std::vector<std::pair<int64_t, std::unique_ptr<uint16_t[]>>> outgrown_;
};

#ifdef STRATA_HAVE_DNNL

using dnnl_dt = dnnl::memory::data_type;

// Where a product's operands lie: batch matrices C_i = op(A_i) op(B_i) (+ beta C_i),
// C_i (m, n) at c + i * sc with rows ldc apart, and so on.
struct Bf16Shape {
  int64_t batch, m, n, k;
  bool ta, tb;
  float beta;
  int64_t lda, sa, ldb, sb, ldc, sc;
  bool bias = false;                          // C = op(A) op(B) + a bias row (one matrix, beta 0)
  bool rows_vary = false;                     // m and k at run time (ProductWorkspace::RowsVary)
  bool a_rounded = false, b_rounded = false;  // the operand comes from a RoundedCopy
  auto key() const {
    return std::make_tuple(batch, m, n, k, ta, tb, beta, lda, sa, ldb, sb, ldc, sc, bias, rows_vary, a_rounded,
                           b_rounded);
  }
  bool operator<(const Bf16Shape& o) const { return key() < o.key(); }
};

// Elements from an operand's first to one past its last: batch matrices of (rows, cols),
// rows ld apart (columns, when transposed), s apart.
inline int64_t operand_extent(int64_t batch, int64_t rows, int64_t cols, int64_t ld, int64_t s, bool transposed) {
  return (batch - 1) * s + (transposed ? (cols - 1) * ld + rows : (rows - 1) * ld + cols);
}

// One shape's matmul and the reorders that round its operands to bf16, made once.
struct Bf16Product {
  dnnl::memory::desc a_f32, b_f32, c_f32;  // the caller's float layouts (strides)
  dnnl::memory::desc a_bf16, b_bf16;       // dense bf16 copies of the operands
  dnnl::reorder round_a, round_b;
  dnnl::matmul product;
};

// oneDNN's engine and stream, and the primitives of every shape a model's products have.
class Bf16Products {
 public:
  // oneDNN runs on the rank's OpenMP threads, whose count the process set at start
  // (cli/thread_choice), as Kokkos and OpenBLAS do.
  Bf16Products() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  // a_copy, b_copy: the operand already rounded (a copy holds it, or a kernel wrote it as
  // bf16), else nullptr and it is rounded into a buffer of the stack. bias: n values added
  // to every row of C in the product's epilogue (shape.bias), else nullptr.
  void run(Bf16Stack& stack, Bf16Shape shape, const float* a, const uint16_t* a_copy, const float* b,
           const uint16_t* b_copy, float* c, const float* bias = nullptr) {
    const Bf16Shape& s = shape;
    if (s.rows_vary && s.batch == 1) {
      run_any_rows(stack, shape, a, a_copy, b, b_copy, c, bias);
      return;
    }
    shape.a_rounded = a_copy != nullptr;
    shape.b_rounded = b_copy != nullptr;
    auto it = cache_.find(shape);
    if (it == cache_.end()) it = cache_.emplace(shape, make(shape)).first;
    Bf16Product& p = it->second;
    uint16_t* a_round = a_copy ? nullptr : stack.take(int64_t(p.a_bf16.get_size() / sizeof(uint16_t)));
    uint16_t* b_round = b_copy ? nullptr : stack.take(int64_t(p.b_bf16.get_size() / sizeof(uint16_t)));
    dnnl::memory c_user(p.c_f32, engine_, c);
    dnnl::memory a_bf16(p.a_bf16, engine_, a_copy ? const_cast<uint16_t*>(a_copy) : a_round);
    dnnl::memory b_bf16(p.b_bf16, engine_, b_copy ? const_cast<uint16_t*>(b_copy) : b_round);
    if (!a_copy) {
      dnnl::memory a_user(p.a_f32, engine_, const_cast<float*>(a));
      p.round_a.execute(stream_, a_user, a_bf16);
    }
    if (!b_copy) {
      dnnl::memory b_user(p.b_f32, engine_, const_cast<float*>(b));
      p.round_b.execute(stream_, b_user, b_bf16);
    }
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, a_bf16}, {DNNL_ARG_WEIGHTS, b_bf16}, {DNNL_ARG_DST, c_user}};
    if (s.bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_desc(s.n), engine_, const_cast<float*>(bias)));
    p.product.execute(stream_, args);
    stream_.wait();
    if (b_round) stack.give_back(b_round);
    if (a_round) stack.give_back(a_round);
  }

  int64_t primitives() const { return int64_t(cache_.size() + any_rows_.size()); }

  // dst = src rounded to bf16, n values (a RoundedCopy's making): oneDNN's reorder, the
  // rounding the products' own reorders do.
  void round(const float* src, uint16_t* dst, int64_t n) {
    const dnnl::memory::desc f32({n}, dnnl_dt::f32, dnnl::memory::format_tag::a);
    const dnnl::memory::desc bf16({n}, dnnl_dt::bf16, dnnl::memory::format_tag::a);
    auto it = rounds_.find(n);
    if (it == rounds_.end())
      it = rounds_.emplace(n, dnnl::reorder(dnnl::reorder::primitive_desc(engine_, f32, engine_, bf16))).first;
    dnnl::memory from(f32, engine_, const_cast<float*>(src)), to(bf16, engine_, dst);
    it->second.execute(stream_, from, to);
    stream_.wait();
  }

 private:
  // The logical (batch, rows, cols) matrices of row-major ones with leading dimension ld
  // and batch stride s, transposed or not.
  static dnnl::memory::desc logical(int64_t batch, int64_t rows, int64_t cols, int64_t ld, int64_t s, bool transposed,
                                    dnnl_dt type = dnnl_dt::f32) {
    return dnnl::memory::desc({batch, rows, cols}, type,
                              transposed ? dnnl::memory::dims{s, 1, ld} : dnnl::memory::dims{s, ld, 1});
  }

  // A bias of n values added to every row, and a product's matmul: C = A B (+ bias) + beta C.
  static dnnl::memory::desc bias_desc(int64_t n) {
    return dnnl::memory::desc({1, 1, n}, dnnl_dt::f32, dnnl::memory::dims{n, n, 1});
  }
  dnnl::matmul matmul_of(const dnnl::memory::desc& a, const dnnl::memory::desc& b, const dnnl::memory::desc& c,
                         float beta, bool bias, int64_t n) const {
    dnnl::primitive_attr attr;
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    const auto desc = bias ? dnnl::matmul::desc(a, b, bias_desc(n), c) : dnnl::matmul::desc(a, b, c);
    return dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine_));
  }

  // One matrix whose m and k the primitive takes at run time (its kind: transposes, n,
  // beta, bias). An operand no copy holds is rounded as it lies into a dense buffer
  // (round_rows_to_bf16: the products' rounding); a copy is read where it lies.
  void run_any_rows(Bf16Stack& stack, const Bf16Shape& s, const float* a, const uint16_t* a_copy, const float* b,
                    const uint16_t* b_copy, float* c, const float* bias) {
    constexpr int64_t R = DNNL_RUNTIME_DIM_VAL;
    const auto kind = std::make_tuple(s.ta, s.tb, s.n, s.beta, s.bias);
    auto it = any_rows_.find(kind);
    if (it == any_rows_.end()) {
      const auto any = [](bool transposed, int64_t cols, dnnl_dt type) {
        return dnnl::memory::desc({1, R, cols}, type,
                                  transposed ? dnnl::memory::dims{R, 1, R} : dnnl::memory::dims{R, R, 1});
      };
      const dnnl::memory::desc a_any = any(s.ta, R, dnnl_dt::bf16), b_any = any(s.tb, s.n, dnnl_dt::bf16);
      const dnnl::memory::desc c_any({1, R, s.n}, dnnl_dt::f32, dnnl::memory::dims{R, R, 1});
      it = any_rows_.emplace(kind, matmul_of(a_any, b_any, c_any, s.beta, s.bias, s.n)).first;
    }
    // each operand as it lies: (rows, cols) with rows ld apart
    const int64_t a_rows = s.ta ? s.k : s.m, a_cols = s.ta ? s.m : s.k;
    const int64_t b_rows = s.tb ? s.n : s.k, b_cols = s.tb ? s.k : s.n;
    uint16_t* a_round = a_copy ? nullptr : stack.take(a_rows * a_cols);
    uint16_t* b_round = b_copy ? nullptr : stack.take(b_rows * b_cols);
    static_assert(sizeof(bf16) == sizeof(uint16_t));
    if (a_round) round_rows_to_bf16_threaded(a, s.lda, reinterpret_cast<bf16*>(a_round), a_cols, a_rows, a_cols);
    if (b_round) round_rows_to_bf16_threaded(b, s.ldb, reinterpret_cast<bf16*>(b_round), b_cols, b_rows, b_cols);
    const int64_t lda = a_copy ? s.lda : a_cols, ldb = b_copy ? s.ldb : b_cols;
    const auto a_desc = logical(1, s.m, s.k, lda, a_rows * lda, s.ta, dnnl_dt::bf16);
    const auto b_desc = logical(1, s.k, s.n, ldb, b_rows * ldb, s.tb, dnnl_dt::bf16);
    dnnl::memory a_mem(a_desc, engine_, const_cast<uint16_t*>(a_copy ? a_copy : a_round));
    dnnl::memory b_mem(b_desc, engine_, const_cast<uint16_t*>(b_copy ? b_copy : b_round));
    dnnl::memory c_mem(logical(1, s.m, s.n, s.ldc, s.m * s.ldc, false), engine_, c);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
    if (s.bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_desc(s.n), engine_, const_cast<float*>(bias)));
    it->second.execute(stream_, args);
    stream_.wait();
    if (b_round) stack.give_back(b_round);
    if (a_round) stack.give_back(a_round);
  }

  // A rounded operand is read where its copy lies, in the caller's layout; the others are
  // rounded into dense buffers.
  Bf16Product make(const Bf16Shape& s) {
    Bf16Product p;
    p.a_f32 = logical(s.batch, s.m, s.k, s.lda, s.sa, s.ta);
    p.b_f32 = logical(s.batch, s.k, s.n, s.ldb, s.sb, s.tb);
    p.c_f32 = logical(s.batch, s.m, s.n, s.ldc, s.sc, false);
    // A transposed A is rounded transposed as it lies (a plain conversion, where a
    // transposing one runs at a fraction of the speed), so that the product sees the
    // layout it would see reading a copy: the same kernel, the same sums, the same bits
    // either way. B is always made dense (the product packs B whatever its layout).
    p.a_bf16 = s.a_rounded ? logical(s.batch, s.m, s.k, s.lda, s.sa, s.ta, dnnl_dt::bf16)
               : s.ta      ? logical(s.batch, s.m, s.k, s.m, s.m * s.k, true, dnnl_dt::bf16)
                           : dnnl::memory::desc({s.batch, s.m, s.k}, dnnl_dt::bf16, dnnl::memory::format_tag::abc);
    p.b_bf16 = s.b_rounded ? logical(s.batch, s.k, s.n, s.ldb, s.sb, s.tb, dnnl_dt::bf16)
                           : dnnl::memory::desc({s.batch, s.k, s.n}, dnnl_dt::bf16, dnnl::memory::format_tag::abc);
    if (!s.a_rounded) p.round_a = dnnl::reorder(dnnl::reorder::primitive_desc(engine_, p.a_f32, engine_, p.a_bf16));
    if (!s.b_rounded) p.round_b = dnnl::reorder(dnnl::reorder::primitive_desc(engine_, p.b_f32, engine_, p.b_bf16));
    p.product = matmul_of(p.a_bf16, p.b_bf16, p.c_f32, s.beta, s.bias, s.n);
    return p;
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<Bf16Shape, Bf16Product> cache_;
  std::map<std::tuple<bool, bool, int64_t, float, bool>, dnnl::matmul> any_rows_;  // run_any_rows' kinds
  std::map<int64_t, dnnl::reorder> rounds_;
};

#endif


}  // namespace strata::kernels::bf16_detail
