#include "core/deck_keys.hpp"

#include <sstream>

#include "core/deck_key_builders.hpp"

namespace strata {
namespace {

using namespace deck_key_builders;

std::vector<DeckKey> run_keys() {
  using D = Deck;
  const char* run = "run";
  return {
      // [run]
      key(run, &D::run, "name", &RunConfig::name, any<std::string>(),
          "the run's name: its directory is out_dir/name (a plain name: no '/', not '.' or '..')"),
      key(run, &D::run, "out_dir", &RunConfig::out_dir, any<std::string>(), "where run directories are made"),
      key(run, &D::run, "steps", &RunConfig::steps, at_least<int64_t>(1), "optimizer steps of the whole run"),
      key(run, &D::run, "log_every", &RunConfig::log_every, at_least<int64_t>(1),
          "steps between progress lines and metrics.csv rows"),
      key(run, &D::run, "val_every", &RunConfig::val_every, at_least<int64_t>(0),
          "steps between validations (0: none during the run; resnet still validates at the end)"),
      key(run, &D::run, "val_batches", &RunConfig::val_batches, at_least<int64_t>(1),
          "validation batches (of data.batch_size) per evaluation"),
      key(run, &D::run, "seed", &RunConfig::seed, any<uint64_t>(),
          "seed of the initial weights, the data order and the split (>= 0; must match on restart)"),
      key(run, &D::run, "checkpoint_every", &RunConfig::checkpoint_every, at_least<int64_t>(0),
          "steps between checkpoints, and one at the end (0: none)"),
      key(run, &D::run, "keep_checkpoints", &RunConfig::keep_checkpoints, at_least<int64_t>(1),
          "complete checkpoints kept in run_dir/checkpoints (older ones pruned after a newer one is verified)"),
      key(run, &D::run, "max_walltime", &RunConfig::max_walltime, at_least(0.0),
          "seconds: checkpoint and stop before this much has passed (0: no limit)"),
      enum_choice(run, &D::run, "on_nonfinite", &RunConfig::on_nonfinite, on_nonfinite_names(),
                  "a step with a non-finite loss or gradient norm: stop (exit 5) or skip its update"),
      acts_when(
          key(run, &D::run, "max_skipped_steps", &RunConfig::max_skipped_steps, at_least<int64_t>(1),
              "on_nonfinite = \"skip\": stop (exit 5) after this many skipped steps in a row"),
          [](const Deck& d) { return d.run.on_nonfinite == OnNonfinite::Skip; }, "run.on_nonfinite = \"skip\""),
      key(run, &D::run, "stop_timeout", &RunConfig::stop_timeout, at_least(0.0),
          "seconds a rank may take to reach a step boundary after a stop signal before it exits without a "
          "checkpoint (0: wait for ever; at least 10x the slowest step)"),
  };
}

std::vector<DeckKey> model_keys() {
  using D = Deck;
  const char* model = "model";
  return {
      // [model]
      key(model, &D::model, "kind", &ModelConfig::kind, name_word(),
          "the model: one of the kinds src/model defines (listed under Model kinds below; a key marked with a "
          "kind's name belongs to that kind, which declares it)"),
      key(model, &D::model, "init_std", &ModelConfig::init_std, above(0.0), "std of the initial weights"),
      key(model, &D::model, "init_from", &ModelConfig::init_from, any<std::string>(),
          "start a fresh run from these weights instead of random ones: a Hugging Face GPT-2 model.safetensors (or "
          "its folder), an llm.c model .bin, or a strata checkpoint (its parameters only); the optimizer starts "
          "fresh, every tensor's shape is checked against this section, and a restart ignores it (docs/interop.md)"),
      enum_choice(model, &D::model, "precision", &ModelConfig::precision, precision_names(),
                  "the matrix products (linear layers, attention, LM head; the residual network's steps): fp32, or "
                  "bf16 operands with fp32 accumulation (CPUs with AVX512-BF16 or AMX, GPUs of compute capability 8.0 "
                  "or later); softmax, norms, the loss, gradient sums and AdamW stay fp32, the parameters are fp32 "
                  "masters"),
      acts_when(
          key(model, &D::model, "bf16_round_once", &ModelConfig::bf16_round_once, any<bool>(),
              "bf16 on CPUs: round the operands that many products read once: the parameters once per change (an "
              "optimizer update, a checkpoint read, XPipe's prediction; a copy of 2 bytes per parameter), attention's "
              "Q, K, V and output gradient once per pass and its probability blocks once each; and keep the "
              "activations that only feed products (layer-norm and GELU outputs) in bf16, 2 bytes a value (not under "
              "the 2D split); false rounds them in every product and keeps those activations fp32: the same losses, "
              "bit for bit (GPUs round inside the product and keep nothing in bf16)"),
          [](const Deck& d) { return d.model.precision == Precision::BF16; }, "model.precision = \"bf16\""),
  };
}

std::vector<DeckKey> data_keys() {
  using D = Deck;
  const char* data = "data";
  return {
      // [data]
      enum_choice(data, &D::data, "kind", &DataConfig::kind, data_kind_names(),
                  "\"text\" (bytes of files), \"tokens\" (token shards, from strata tokenize or llm.c) or \"random\" "
                  "(uniform tokens) for gpt; \"images\" (IDX files, MNIST layout) for the image classifiers (Model "
                  "kinds below)"),
      key(data, &D::data, "files", &DataConfig::files, any<std::vector<std::string>>(),
          "paths or globs of the text files: what kind = \"text\" trains on and strata tokenize encodes"),
      key(data, &D::data, "token_dir", &DataConfig::token_dir, any<std::string>(),
          "folder strata tokenize writes (shard_NNNNNN.tok and tokenizer.model) and kind = \"tokens\" reads"),
      acts_when(
          key(data, &D::data, "shards", &DataConfig::shards, any<std::vector<std::string>>(),
              "kind = \"tokens\": token shards to read instead of token_dir's (paths or globs; strata .tok or llm.c "
              ".bin files)"),
          [](const Deck& d) { return d.data.kind == DataKind::Tokens; }, "data.kind = \"tokens\""),
      key(data, &D::data, "val_shards", &DataConfig::val_shards, any<std::vector<std::string>>(),
          "kind = \"tokens\": validation shards (e.g. llm.c's *_val_*.bin); then val_fraction is not used"),
      key(data, &D::data, "tokenizer", &DataConfig::tokenizer, any<std::string>(),
          "a SentencePiece .model: strata tokenize encodes with it instead of training one; kind = \"tokens\" "
          "counts bytes and strata generate decodes with it (\"\": token_dir/tokenizer.model)"),
      enum_choice(data, &D::data, "tokenizer_type", &DataConfig::tokenizer_type, tokenizer_type_names(),
                  "the model strata tokenize trains, of model.vocab_size pieces"),
      key(data, &D::data, "shard_mb", &DataConfig::shard_mb, above(0.0),
          "strata tokenize: MB of text per token shard (each is encoded by one rank)"),
      acts_when(
          key(data, &D::data, "dir", &DataConfig::dir, any<std::string>(),
              "kind = \"images\": the IDX files' directory"),
          [](const Deck& d) { return d.data.kind == DataKind::Images; }, "data.kind = \"images\""),
      acts_when(
          key(data, &D::data, "val_fraction", &DataConfig::val_fraction, below_from(0.0, 1.0, true),
              "share of the text (or tokens) held out for validation, in chunks of 4096"),
          [](const Deck& d) {
            return d.data.kind == DataKind::Text || (d.data.kind == DataKind::Tokens && d.data.val_shards.empty());
          },
          "data.kind = \"text\", or \"tokens\" without data.val_shards"),
      key(data, &D::data, "batch_size", &DataConfig::batch_size, at_least<int64_t>(1),
          "global sequences (or images) per step, split over the data-parallel ranks (a multiple of parallel.data)"),
  };
}

std::vector<DeckKey> parallel_grid_keys() {
  using D = Deck;
  const char* par = "parallel";
  return {
      // [parallel]: the grid and where its ranks go
      key(par, &D::parallel, "data", &Layout::data, at_least<int64_t>(1), "data-parallel replicas"),
      key(par, &D::parallel, "pipeline", &Layout::pipeline, at_least<int64_t>(1),
          "ranks along the layers: pipeline stages, or MGRIT's layer blocks"),
      key(par, &D::parallel, "context", &Layout::context, at_least<int64_t>(1),
          "gpt: ranks each sequence is split over (context parallelism): the sequence is cut into 2 x context "
          "chunks and rank r holds chunks r and 2 x context - 1 - r (the causal work balanced); attention passes "
          "keys and values around the ring; the parameters are replicated and their gradients summed over data x "
          "context; model.seq_len a multiple of 2 x context"),
      acts_when(
          enum_choice(
              par, &D::parallel, "context_mode", &Layout::context_mode, context_mode_names(),
              "how context parallelism runs attention: \"ring\" (keys and values passed round the context "
              "group, overlapped with attention's blocks) or \"all-to-all\" (DeepSpeed-Ulysses: an all-to-all "
              "gives each rank whole sequences of 1/context of the heads; the local heads must divide by context)"),
          [](const Deck& d) { return d.parallel.context > 1; }, "parallel.context > 1"),
      key(par, &D::parallel, "tensor_rows", &Layout::tensor_rows, at_least<int64_t>(1),
          "tensor-parallel grid rows (1 for tensor_mode = \"1d\")"),
      key(par, &D::parallel, "tensor_cols", &Layout::tensor_cols, at_least<int64_t>(1),
          "tensor-parallel grid columns: t of the 1D split, or q of the 2D q x q grid"),
      acts_when(
          enum_choice(
              par, &D::parallel, "tensor_mode", &Layout::tensor_mode, tensor_mode_choices(),
              "\"1d\" (Megatron: heads, MLP and vocabulary split t ways), \"2d\" (Optimus: SUMMA on a square grid) "
              "or \"3d\" (AxoNN: every linear's weight split over tensor_x x tensor_y and sharded over tensor_depth)"),
          [](const Deck& d) {
            const auto& p = d.parallel;
            return !p.tensor_axonn() || p.tensor_x * p.tensor_y * p.tensor_depth > 1;
          },
          "a split of more than one rank (3d: tensor_x, tensor_y, tensor_depth)"),
      acts_when(
          key(par, &D::parallel, "tensor_x", &Layout::tensor_x, at_least<int64_t>(1),
              "tensor_mode = \"3d\": the X group, over which the model width C of the residual stream is split (a "
              "block's first linears split their input features over it, its second ones their output features)"),
          is_3d, kNeeds3D),
      acts_when(key(par, &D::parallel, "tensor_y", &Layout::tensor_y, at_least<int64_t>(1),
                    "tensor_mode = \"3d\": the Y group, over which the heads and the MLP's hidden units are split"),
                is_3d, kNeeds3D),
      acts_when(key(par, &D::parallel, "tensor_depth", &Layout::tensor_depth, at_least<int64_t>(1),
                    "tensor_mode = \"3d\": the depth (Z) group, over which the batch is split and every weight block "
                    "sharded (gathered before use, its gradient reduce-scattered: ZeRO-3 within the tensor group)"),
                is_3d, kNeeds3D),
      acts_when(
          key(par, &D::parallel, "tensor_overlap", &Layout::tensor_overlap, any<bool>(),
              "tensor_mode = \"3d\": the next linear's weight gather over depth posted before this linear's product "
              "and the weight gradients' reduce-scatters left in flight under the next product (AxoNN's overlap; the "
              "same values either way, false: each transfer completed where it is needed)"),
          is_3d, kNeeds3D),
      key(par, &D::parallel, "sequence_parallel", &Layout::sequence_parallel, any<bool>(),
          "tensor_mode = \"1d\": Megatron's sequence parallelism; the layer norms, the residual stream and the "
          "embedding's and LM head's rows are split over the tensor group (B x T / t tokens a rank), each "
          "all-reduce of the tensor-parallel layers becomes a reduce-scatter and an all-gather of the same bytes, "
          "and those activations shrink t times; not with the zero-bubble schedules"),
      key(par, &D::parallel, "expert", &Layout::expert, at_least<int64_t>(1),
          "with model.moe_experts: ranks of the data group the experts are split over (expert parallelism: "
          "each holds moe_experts / expert of them, and under a 1D or 3D tensor split the tensor ranks split "
          "them further; tokens go to their experts and back by all-to-alls); "
          "dividing parallel.data"),
      enum_choice(par, &D::parallel, "placement", &Layout::placement, placement_names(),
                  "how ranks take their places in the grid (tensor fastest, then context, pipeline, data): "
                  "\"nodes\" (the ranks in node order, so the tensor and context groups stay inside a node and "
                  "the data and pipeline groups cross the network, however the launcher numbered them) or "
                  "\"launcher\" (in the launcher's rank order as it is)"),
      enum_choice(par, &D::parallel, "comm_backend", &Layout::comm_backend, comm_backend_names(),
                  "collectives on device buffers: MPI, or NCCL (CUDA builds)"),
  };
}

std::vector<DeckKey> parallel_run_keys() {
  using D = Deck;
  const char* par = "parallel";
  return {
      // [parallel]: how the grid runs: sums, micro-batches, schedules, recomputation, ZeRO
      key(par, &D::parallel, "grad_bucket_mb", &Layout::grad_bucket_mb, at_least(0.0),
          "gradient all-reduce bucket (MB), started during the backward (0: one all-reduce after it)"),
      enum_choice(par, &D::parallel, "grad_sum", &Layout::grad_sum, grad_sum_names(),
                  "how the data replicas' gradients are summed: \"flat\" (one all-reduce over all of them) or "
                  "\"nodes\" (a reduce-scatter among the replicas on each node, an all-reduce of each rank's block "
                  "across the nodes, an all-gather inside the node: 1/L of the gradients' bytes cross the network "
                  "from each rank, L replicas a node, where a flat ring sends them all; the same sum in another "
                  "order; every node must hold as many replicas; MPI only; not with zero or mgrit yet)"),
      acts_when(
          enum_choice(par, &D::parallel, "grad_compression", &Layout::grad_compression, grad_compression_names(),
                      "grad_sum = \"nodes\": what crosses the network: \"none\" (the floats) or \"int8\" "
                      "(each rank's block as 8-bit codes with a scale per 256 values, 4x fewer bytes, what the "
                      "rounding lost added to the next step's block: error feedback; all-gathered, so it "
                      "saves bytes up to 8 nodes) or \"powersgd\" (each weight matrix's rows in the block as "
                      "two rank-r factors, summed by all-reduce, with error feedback and Q warm from the last "
                      "step; vectors go as floats). Inside a node the sums stay in full precision; the "
                      "codec's error feedback is in the checkpoint"),
          [](const Deck& d) { return d.parallel.grad_sum == GradSum::Nodes; },
          "parallel.grad_sum = \"nodes\" (it compresses the part that crosses the network)"),
      acts_when(
          key(par, &D::parallel, "powersgd_rank", &Layout::powersgd_rank, at_least<int64_t>(1),
              "grad_compression = \"powersgd\": the rank r of the factors P (rows x r) and Q (cols x r) "
              "sent for each matrix in place of its rows x cols values"),
          [](const Deck& d) {
            return d.parallel.grad_sum == GradSum::Nodes && d.parallel.grad_compression == GradCompression::PowerSgd;
          },
          "parallel.grad_compression = \"powersgd\""),
      key(par, &D::parallel, "micro_batches", &Layout::micro_batches, at_least<int64_t>(1),
          "micro-batches per step per data replica (dividing its batch): they feed the pipeline's stages, or "
          "without a pipeline accumulate their gradients before one all-reduce (one micro-batch's activations "
          "kept)"),
      acts_when(
          schedule_key(
              par,
              "how the pipeline ranks work through the layers: GPipe (fill-drain), 1F1B, interleaved 1F1B (gpt: "
              "virtual_stages chunks per stage, (p-1)/(v m) of bubble, v times the messages), the zero-bubble ZB-H1 "
              "(1F1B's "
              "peak memory, about a third of its bubble) and ZB-H2 (up to 2p-1 micro-batches in flight), which run "
              "each backward as an input half and a weight half that fills the bubbles (recompute = \"none\"), "
              "XPipe (gpt: asynchronous, no flush), or MGRIT (resnet: the layers solved in parallel like time steps, "
              "[layerpar])"),
          [](const Deck& d) { return d.parallel.pipeline > 1 || d.parallel.mgrit(); },
          "parallel.pipeline > 1 (pipeline stages)"),
      enum_choice(par, &D::parallel, "recompute", &Layout::recompute, recompute_names(),
                  "gpt: what the backward recomputes rather than keeps: \"none\"; \"selective\" (the GELU output "
                  "of every block, 4C per token: one copy per micro-batch instead of one per block; the fused "
                  "attention keeps no probabilities to remake); or \"full\" (each block keeps only its input and "
                  "runs its forward again in the backward: one block's activations per micro-batch; resnet: "
                  "every k-th state kept, k near sqrt(steps), the others remade). The same results bit for bit"),
      key(par, &D::parallel, "zero", &Layout::zero, from_to(0, 3),
          "ZeRO stage: 0, 1 (each data-parallel rank keeps the AdamW moments of 1/data of the parameters: "
          "gradients are reduce-scattered, each rank updates its block, the parameters are all-gathered; the "
          "same traffic as the all-reduce; not with xpipe) or 2 (the gradients too: each unit of the model "
          "(a block, the embedding, ...) reduce-scattered as the backward makes it final, every micro-batch, "
          "each rank keeping 1/data of it; under zb-h1 and zb-h2 a unit's slot lives from a micro-batch's input half "
          "to its weight half; not with xpipe or mgrit) or 3 (the parameters too: "
          "each rank keeps 1/data of every unit, and a pass gathers each unit's whole parameters just before "
          "it uses them, the next zero_prefetch units' gathers posted ahead, and gives them back after; the "
          "GPT only; not with xpipe or mgrit)"),
      key(par, &D::parallel, "zero_prefetch", &Layout::zero_prefetch, from_to(0, 16),
          "zero = 3: how many of a pass's next units (a block's linears and the vocabulary's chunks; whole "
          "blocks under a 2D or 3D split, sequence parallelism or zb-h1/zb-h2) have their parameters' gathers "
          "posted before the "
          "current one computes (0: each gathered when it is reached; each one more holds one more unit's "
          "parameters; refused with another zero stage)"),
      key(par, &D::parallel, "zero_keep_params", &Layout::zero_keep_params, any<bool>(),
          "zero = 3: keep each unit's gathered parameters from its first use in a step until the update "
          "(one gather per unit per step instead of one per forward and one per backward of every "
          "micro-batch, for the stage's whole parameters held through the step: worth it with many "
          "micro-batches, where the gathers would cost 2 x micro_batches x the parameters' bytes; refused with "
          "another zero stage)"),
      key(par, &D::parallel, "virtual_stages", &Layout::virtual_stages, at_least<int64_t>(1),
          "schedule = \"interleaved\": model chunks per pipeline stage (v >= 2; the layers cut into pipeline x v "
          "chunks placed round-robin; micro_batches a multiple of pipeline)"),
      acts_when(
          key(par, &D::parallel, "last_stage_layers", &Layout::last_stage_layers, at_least<int64_t>(0),
              "gpt: the transformer layers on the last pipeline stage, which also runs the LM head and the "
              "loss, the other stages splitting the rest evenly (0: every stage as many layers, give or take "
              "one): fewer layers there balance a head that costs as much as some layers (stages.csv shows "
              "each stage's seconds)"),
          [](const Deck& d) {
            return d.parallel.pipeline > 1 && !d.parallel.mgrit() && d.parallel.schedule != Schedule::Interleaved;
          },
          "parallel.pipeline > 1 with a schedule other than \"interleaved\""),
      key(par, &D::parallel, "weight_prediction", &Layout::weight_prediction, any<bool>(),
          "xpipe: run each pass on weights predicted to its target version"),
      key(par, &D::parallel, "measure_staleness", &Layout::measure_staleness, any<bool>(),
          "xpipe: report how far each pass's weights are from its target's"),
  };
}

std::vector<DeckKey> optim_keys() {
  using D = Deck;
  const char* opt = "optim";
  return {
      // [optim]
      key(opt, &D::optim, "lr", &OptimConfig::lr, above(0.0), "peak learning rate (AdamW)"),
      key(opt, &D::optim, "min_lr", &OptimConfig::min_lr, at_least(0.0),
          "learning rate at the end of the cosine decay (at most lr)"),
      key(opt, &D::optim, "warmup_steps", &OptimConfig::warmup_steps, at_least<int64_t>(0),
          "linear warm-up steps before the cosine decay"),
      key(opt, &D::optim, "weight_decay", &OptimConfig::weight_decay, at_least(0.0),
          "decoupled weight decay, on 2D weights only (not biases and norms)"),
      key(opt, &D::optim, "beta1", &OptimConfig::beta1, below_from(0.0, 1.0, false), "AdamW's first-moment decay"),
      key(opt, &D::optim, "beta2", &OptimConfig::beta2, below_from(0.0, 1.0, false), "AdamW's second-moment decay"),
      key(opt, &D::optim, "eps", &OptimConfig::eps, above(0.0), "AdamW's epsilon"),
      key(opt, &D::optim, "grad_clip", &OptimConfig::grad_clip, at_least(0.0),
          "largest global gradient norm; larger ones are scaled down (0: no clipping)"),
  };
}

std::vector<DeckKey> layerpar_keys() {
  using D = Deck;
  const char* lp = "layerpar";
  return {
      // [layerpar]
      acts_when(
          key(lp, &D::parallel, "levels", &Layout::mgrit_levels, at_least<int64_t>(1),
              "MGRIT levels (1: sequential propagation; the steps (resnet: model.steps; gpt: model.n_layer less the "
              "buffers) must be a multiple of cfactor^(levels-1))"),
          is_mgrit, kNeedsMgrit),
      acts_when(key(lp, &D::layerpar, "cfactor", &LayerParConfig::cfactor, at_least<int64_t>(2), "coarsening factor"),
                is_mgrit, kNeedsMgrit),
      acts_when(key(lp, &D::layerpar, "fwd_iterations", &LayerParConfig::fwd_iterations, at_least<int64_t>(1),
                    "MGRIT V-cycles of the forward solve"),
                is_mgrit, kNeedsMgrit),
      acts_when(key(lp, &D::layerpar, "bwd_iterations", &LayerParConfig::bwd_iterations, at_least<int64_t>(1),
                    "MGRIT V-cycles of the adjoint (backward) solve"),
                is_mgrit, kNeedsMgrit),
      acts_when(key(lp, &D::layerpar, "tolerance", &LayerParConfig::tolerance, at_least(0.0),
                    "stop the cycles earlier when the residual norm falls below this (0: never)"),
                is_mgrit, kNeedsMgrit),
      acts_when(enum_choice(lp, &D::layerpar, "relaxation", &LayerParConfig::relaxation, relaxation_names(),
                            "finest level's relaxation (coarser levels use FCF)"),
                is_mgrit, kNeedsMgrit),
      acts_when(key(lp, &D::layerpar, "warm_start", &LayerParConfig::warm_start, any<bool>(),
                    "start each solve from the previous batch's solution"),
                is_mgrit, kNeedsMgrit),
      acts_when(enum_choice(
                    lp, &D::layerpar, "control", &LayerParConfig::control, gradient_control_names(),
                    "when the checked gradient error exceeds max_gradient_error: go on (none), switch to exact "
                    "one-level solves for the rest of the run (switch), or add one iteration to each solve (tighten)"),
                is_mgrit, kNeedsMgrit),
      acts_when(
          key(lp, &D::layerpar, "check_every", &LayerParConfig::check_every, at_least<int64_t>(0),
              "compare the step's gradient with the exact one (a one-level solve of the same batch) every this many "
              "steps, logged as grad_error and grad_cosine (0: never)"),
          is_mgrit, kNeedsMgrit),
      acts_when(key(lp, &D::layerpar, "max_gradient_error", &LayerParConfig::max_gradient_error, at_least(0.0),
                    "the relative gradient error |g - g_exact| / |g_exact| at which layerpar.control acts (after "
                    "optim.warmup_steps)"),
                is_mgrit, kNeedsMgrit),
  };
}

// [parallel]: how a pipeline stage picks its next pass
std::vector<DeckKey> dispatch_keys() {
  using D = Deck;
  const char* par = "parallel";
  return {
      acts_when(enum_choice(par, &D::parallel, "dispatch", &Layout::dispatch, dispatch_names(),
                            "how a pipeline stage picks its next pass: the schedule's order (\"order\"), or "
                            "(\"ready\") the highest-ranked pass of the schedule whose input has arrived, so a slow "
                            "neighbour's late message does not hold up work that could run: the schedule becomes a "
                            "hint; never more micro-batches in flight than the schedule's peak, the same results bit "
                            "for bit (gpipe, 1f1b, interleaved, zb-h1, zb-h2; not xpipe)"),
                [](const Deck& d) { return d.parallel.pipeline > 1 && !d.parallel.mgrit(); },
                "parallel.pipeline > 1 (pipeline stages)"),
      acts_when(key(par, &D::parallel, "dispatch_in_flight", &Layout::dispatch_in_flight, at_least<int64_t>(0),
                    "dispatch = \"ready\": the most micro-batches in flight on a stage (per chunk), where more than "
                    "the schedule's peak: a stage may then run forwards ahead while a backward's gradient is late, "
                    "for one more activation cache each (0: the schedule's peak; not on a stage that runs one "
                    "forward at a time)"),
                [](const Deck& d) { return d.parallel.pipeline > 1 && d.parallel.dispatch == Dispatch::Ready; },
                "parallel.dispatch = \"ready\""),
  };
}

std::vector<DeckKey> variability_keys() {
  using D = Deck;
  const char* var = "variability";
  using V = VariabilityConfig;
  const auto flushing_pipeline = [](const Deck& d) {
    return d.parallel.pipeline > 1 && !d.parallel.mgrit() && d.parallel.schedule != Schedule::XPipe;
  };
  const auto slowed = [=](const Deck& d) { return flushing_pipeline(d) && d.variability.active(); };
  const char* needs_slowdown = "variability.slowdown_max > 0 (and pipeline stages)";
  return {
      // [variability]
      acts_when(key(var, &D::variability, "slowdown_max", &V::slowdown_max, at_least(0.0),
                    "the largest slowdown, as a share of the pass's own time (0: none injected; 0.6: a pass takes "
                    "up to 1.6 times as long)"),
                flushing_pipeline,
                "parallel.pipeline > 1 and a flushing schedule (gpipe, 1f1b, interleaved, zb-h1 or zb-h2)"),
      acts_when(key(var, &D::variability, "stage", &V::stage, at_least<int64_t>(-1),
                    "the pipeline stage whose passes are slowed (-1: every stage, each pass drawn independently)"),
                slowed, needs_slowdown),
      acts_when(enum_choice(var, &D::variability, "draw", &V::draw, slowdown_draw_names(),
                            "how a pass's slowdown is drawn: uniform in [slowdown_min, slowdown_max], or spikes "
                            "(slowdown_max with probability spike_chance, else none)"),
                slowed, needs_slowdown),
      acts_when(key(var, &D::variability, "slowdown_min", &V::slowdown_min, at_least(0.0),
                    "uniform: the smallest slowdown, as a share of the pass's own time"),
                [=](const Deck& d) { return slowed(d) && d.variability.draw == SlowdownDraw::Uniform; },
                "variability.slowdown_max > 0 and draw = \"uniform\""),
      acts_when(key(var, &D::variability, "spike_chance", &V::spike_chance, at_least(0.0),
                    "spikes: the probability that a pass is slowed (at most 1)"),
                [=](const Deck& d) { return slowed(d) && d.variability.draw == SlowdownDraw::Spikes; },
                "variability.slowdown_max > 0 and draw = \"spikes\""),
      acts_when(key(var, &D::variability, "seed", &V::seed, any<uint64_t>(), "the draws' seed"), slowed,
                needs_slowdown),
  };
}

// Every key, section by section, in the order the reference lists them.
std::vector<DeckKey> declare_keys() {
  std::vector<DeckKey> keys;
  for (auto section :
       {run_keys, model_keys, data_keys, parallel_grid_keys, parallel_run_keys, dispatch_keys, optim_keys,
        layerpar_keys, variability_keys})
    for (auto& k : section()) keys.push_back(std::move(k));
  return keys;
}

}  // namespace

const std::vector<DeckSection>& deck_sections() {
  static const std::vector<DeckSection> sections = {
      {"run", "The run: its name and directory, length, logging, checkpoints and what stops it"},
      {"model", "The network: one of the model kinds listed at the end"},
      {"data", "What it trains on, and the global batch"},
      {"parallel", "The rank grid data x pipeline x tensor_rows x tensor_cols, and how each axis runs"},
      {"optim", "AdamW with warm-up, cosine decay and gradient clipping"},
      {"layerpar",
       "Layer-parallel training by MGRIT (parallel.schedule = \"mgrit\"): the residual network's steps, or the "
       "GPT's blocks between two serial buffers"},
      {"variability",
       "Injected slowdowns of pipeline stages (a what-if tool): each pass on the chosen stages followed by an idle "
       "wait of a seeded random share of its own time"},
  };
  return sections;
}

const DeckKeys& core_deck_keys() {
  static const DeckKeys keys = declare_keys();
  return keys;
}

DeckKeys merge_deck_keys(const DeckKeys& kind_keys) {
  DeckKeys out;
  for (const auto& s : deck_sections()) {
    for (const auto& k : core_deck_keys())
      if (k.section == s.name) out.push_back(k);
    for (const auto& k : kind_keys)
      if (k.section == s.name) out.push_back(k);
  }
  return out;
}

std::string format_deck_value(const toml::value& v) {
  if (v.is_floating()) {
    std::string s = number_text(v.as_floating());
    if (s.find_first_of(".en") == std::string::npos) s += ".0";  // stays a TOML float
    return s;
  }
  if (v.is_integer()) return number_text(int64_t(v.as_integer()));
  if (v.is_boolean()) return v.as_boolean() ? "true" : "false";
  if (v.is_string()) return toml::format(v);
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.as_array().size(); ++i) out += (i ? ", " : "") + format_deck_value(v.as_array()[i]);
    return out + "]";
  }
  return toml::format(v);
}

std::string deck_reference(const DeckKeys& table) {
  std::string out =
      "# Deck keys\n\n"
      "<!-- generated by `strata deck --reference` from src/core/deck_keys.cpp and the model kinds' keys "
      "(src/model/*_kind.cpp): edit the tables there, not this file -->\n\n"
      "A deck is a TOML file of the sections below. Every key is optional: a key left out takes its default. An "
      "unknown section or key, a value of the wrong type or out of range, and a key set to other than its default "
      "where it has no effect (a schedule without parallel.pipeline, [layerpar] without schedule = \"mgrit\", the "
      "moe_ keys without model.moe_experts, ...) are refused with one line naming the key (exit 2). `--set "
      "section.key=value` overrides a key from the command line, and `strata deck DECK` prints the "
      "resolved deck, which every run also writes to its run directory as `deck.toml`.\n";
  for (const auto& s : deck_sections()) {
    out += "\n## [" + s.name + "]\n\n" + s.doc + ".\n\n";
    out += "| key | type | default | allowed | what it does |\n|---|---|---|---|---|\n";
    const Deck defaults;
    for (const auto& k : table)
      if (k.section == s.name)
        out += "| `" + k.name + "` | " + k.type + " | `" + format_deck_value(k.get(defaults)) + "` | " + k.allowed +
               " | " + k.doc + " |\n";
  }
  return out;
}

}  // namespace strata
