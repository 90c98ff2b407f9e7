// The 5D grid: for every layout data x pipeline x context x rows x cols that fits the job,
// each rank's coordinates, every sub-communicator's members (checked by summing world
// ranks over it against the sum the layout predicts) and the pipeline neighbours; and the
// 3D split's X, Y and depth groups of every X x Y x depth that fits.
#include <mpi.h>

#include <catch2/catch.hpp>

#include "comm/grid.hpp"

using namespace strata;

namespace {
int sum_over(MPI_Comm c, int x) {
  int s = 0;
  MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_SUM, c);
  return s;
}
int size_of(MPI_Comm c) {
  int s = 0;
  MPI_Comm_size(c, &s);
  return s;
}
}  // namespace

TEST_CASE("every 5D layout of the job builds consistent sub-communicators", "[mpi][grid]") {
  int world = 1, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int layouts = 0;
  for (int d = 1; d <= world; ++d)
    for (int p = 1; p <= world; ++p)
      for (int x = 1; x <= world; ++x)
        for (int r = 1; r <= world; ++r)
          for (int c = 1; c <= world; ++c) {
            if (d * p * x * r * c != world) continue;
            ++layouts;
            Layout cfg;
            cfg.data = d;
            cfg.pipeline = p;
            cfg.context = x;
            cfg.tensor_rows = r;
            cfg.tensor_cols = c;
            Grid g(cfg, MPI_COMM_WORLD);
            const GridCoords k = g.coords();
            INFO("layout " << d << "x" << p << "x" << x << "x" << r << "x" << c << " rank " << me);
            CHECK(g.rank_of(k) == me);
            // tensor-fastest, then context, pipeline, data
            CHECK(me == (((k.data * p + k.pipeline) * x + k.context) * r + k.row) * c + k.col);
            // expected member sums from the layout alone
            int replica_sum = 0, context_sum = 0, pipe_sum = 0, row_sum = 0, col_sum = 0, tensor_sum = 0, model_sum = 0;
            for (int i = 0; i < d; ++i)
              for (int j = 0; j < x; ++j) replica_sum += g.rank_of({i, k.pipeline, k.row, k.col, j});
            for (int j = 0; j < x; ++j) context_sum += g.rank_of({k.data, k.pipeline, k.row, k.col, j});
            for (int i = 0; i < p; ++i) pipe_sum += g.rank_of({k.data, i, k.row, k.col, k.context});
            for (int i = 0; i < c; ++i) row_sum += g.rank_of({k.data, k.pipeline, k.row, i, k.context});
            for (int i = 0; i < r; ++i) col_sum += g.rank_of({k.data, k.pipeline, i, k.col, k.context});
            for (int i = 0; i < r; ++i)
              for (int j = 0; j < c; ++j) tensor_sum += g.rank_of({k.data, k.pipeline, i, j, k.context});
            for (int s = 0; s < p; ++s)
              for (int i = 0; i < r; ++i)
                for (int j = 0; j < c; ++j) model_sum += g.rank_of({k.data, s, i, j, k.context});
            CHECK(size_of(g.replicas().raw()) == d * x);
            CHECK(size_of(g.context().raw()) == x);
            CHECK(size_of(g.model().raw()) == p * r * c);
            CHECK(sum_over(g.replicas().raw(), me) == replica_sum);
            CHECK(sum_over(g.context().raw(), me) == context_sum);
            CHECK(sum_over(g.model().raw(), me) == model_sum);
            CHECK(g.context().rank() == k.context);
            CHECK(size_of(g.pipeline().raw()) == p);
            CHECK(size_of(g.tensor_row().raw()) == c);
            CHECK(size_of(g.tensor_col().raw()) == r);
            CHECK(size_of(g.tensor().raw()) == r * c);
            CHECK(sum_over(g.pipeline().raw(), me) == pipe_sum);
            CHECK(sum_over(g.tensor_row().raw(), me) == row_sum);
            CHECK(sum_over(g.tensor_col().raw(), me) == col_sum);
            CHECK(sum_over(g.tensor().raw(), me) == tensor_sum);
            // the reversed pipeline group ranks the stages backwards
            CHECK(g.pipeline_reversed().size() == p);
            CHECK(g.pipeline_reversed().rank() == p - 1 - k.pipeline);
            CHECK(sum_over(g.pipeline_reversed().raw(), me) == pipe_sum);
            CHECK((g.embedding() != nullptr) == (p > 1 && (k.pipeline == 0 || k.pipeline == p - 1)));
            // the rank in the replica group is (data, context), data slowest
            CHECK(g.replicas().rank() == k.data * x + k.context);
            CHECK(g.data_rank() == k.data);
          }
  CHECK(layouts >= 1);
  Layout wrong;
  wrong.data = world + 1;
  CHECK_THROWS_WITH(Grid(wrong, MPI_COMM_WORLD), Catch::Contains("ranks, but the job has " + std::to_string(world)));
}

TEST_CASE("3D tensor groups: x fastest, then y, then depth; each group's members and order", "[mpi][grid]") {
  int world = 1, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  for (int nx : {1, 2, 4})
    for (int ny : {1, 2, 4})
      for (int nz : {1, 2, 4}) {
        if (world % (nx * ny * nz) != 0) continue;
        Layout cfg;
        cfg.tensor_mode = TensorMode::ThreeD;
        cfg.tensor_x = nx, cfg.tensor_y = ny, cfg.tensor_depth = nz;
        cfg.data = world / (nx * ny * nz);
        Grid g(cfg, MPI_COMM_WORLD);
        INFO("X x Y x Z = " << nx << " x " << ny << " x " << nz);
        const auto& c = g.coords();
        const int t = me % (nx * ny * nz), base = me - t;  // this replica's first tensor rank
        CHECK(c.data == me / (nx * ny * nz));
        CHECK(t == (c.depth * ny + c.y) * nx + c.x);
        CHECK(g.rank_of(c) == me);
        REQUIRE(g.tensor_x());
        CHECK(g.tensor_x()->size() == nx);
        CHECK(g.tensor_y()->size() == ny);
        CHECK(g.tensor_depth()->size() == nz);
        CHECK(g.tensor_x()->rank() == c.x);
        CHECK(g.tensor_y()->rank() == c.y);
        CHECK(g.tensor_depth()->rank() == c.depth);
        // members: the world ranks summed over each group against the layout's
        int want_x = 0, want_y = 0, want_z = 0;
        for (int i = 0; i < nx; ++i) want_x += base + (c.depth * ny + c.y) * nx + i;
        for (int i = 0; i < ny; ++i) want_y += base + (c.depth * ny + i) * nx + c.x;
        for (int i = 0; i < nz; ++i) want_z += base + (i * ny + c.y) * nx + c.x;
        CHECK(sum_over(g.tensor_x()->raw(), me) == want_x);
        CHECK(sum_over(g.tensor_y()->raw(), me) == want_y);
        CHECK(sum_over(g.tensor_depth()->raw(), me) == want_z);
        CHECK(size_of(g.tensor().raw()) == nx * ny * nz);
      }
}
