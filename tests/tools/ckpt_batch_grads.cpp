// Writes strata's loss and parameter gradients of validation batch 0 for the model in a
// checkpoint, to an HDF5 file (/grads/<global name>, the batch as /batch/tokens and
// /batch/targets, attribute "loss"), for
// tools/ckpt_to_torch.py --grads; products in fp32 or bf16 (tools/ckpt_to_torch.py --bf16).
// Usage: ckpt_batch_grads CKPT.h5 OUT.h5 [fp32|bf16]
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/model_checkpoint.hpp"
#include "data/deck_data.hpp"
#include "data/token_batches.hpp"
#include "kernels/matmul_bf16.hpp"
#include "model/gpt.hpp"
#include "model/model_kind.hpp"

using namespace strata;

int main(int argc, char** argv) {
  int provided = 0;  // Kokkos' and the BLAS's OpenMP threads never call MPI
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rc = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    const std::string precision = argc == 4 ? argv[3] : "fp32";
    if ((argc != 3 && argc != 4) || (precision != "fp32" && precision != "bf16")) {
      std::fprintf(stderr, "usage: ckpt_batch_grads CKPT.h5 OUT.h5 [fp32|bf16]\n");
      rc = 2;
    } else if (precision == "bf16" && !kernels::bf16_products_unavailable().empty()) {
      std::fprintf(stderr, "ckpt_batch_grads: no bf16 products here: %s\n",
                   kernels::bf16_products_unavailable().c_str());
      rc = 3;
    } else {
      const std::string ckpt = argv[1];
      const Deck deck = parse_model_deck(CheckpointReader(ckpt).string_attribute("deck"), ckpt);
      ModelConfig m = deck.model;
      m.precision = precision == "bf16" ? Precision::BF16 : Precision::FP32;
      GPT<float> model(m, deck.run.seed);
      read_model_checkpoint(ckpt, model.params());
      const BlockContext ctx{deck.data.batch_size, deck.model.seq_len};
      TokenBatches batches(make_token_source(deck), BatchShape{ctx.batch}, ctx.seq_len);
      const SampleBatch<float> batch = batches.load(Split::Validation, 0, 0);
      auto& store = model.params();
      store.zero_grads();
      const double loss = model.forward(ctx, batch.tokens, batch.targets) / double(ctx.rows());
      model.backward(ctx, 1.0f / float(ctx.rows()));
      auto grads = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), store.grads());
      CheckpointWriter w(argv[2], MPI_COMM_SELF);
      for (const auto& p : store.infos())
        w.write_tensor("/grads/" + p.name, p.shape, p.start, p.count, grads.data() + p.offset);
      // the batch itself, for checks that compute the loss their own way (ids as floats: exact below 2^24)
      for (const auto& [name, ids] :
           {std::pair{"/batch/tokens", batch.tokens}, std::pair{"/batch/targets", batch.targets}}) {
        const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ids);
        std::vector<float> values(h.size());
        for (size_t i = 0; i < values.size(); ++i) values[i] = float(h(i));
        w.write_tensor(name, {ctx.batch, ctx.seq_len}, {0, 0}, {ctx.batch, ctx.seq_len}, values.data());
      }
      w.write_attribute("loss", loss);
      w.close();
    }
  }
  MPI_Finalize();
  return rc;
}
