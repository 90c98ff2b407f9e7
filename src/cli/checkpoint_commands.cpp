// The sub-commands that read a checkpoint, on rank 0 (other ranks, if any, just wait):
//   strata inspect CKPT.h5
//   strata generate CKPT.h5 [--prompt TEXT] [--tokens N] [--temperature T] [--seed S] [--tokenizer M]
//   strata export CKPT.h5 --format hf|llmc OUT [--dtype fp32|bf16]
#include <cstdio>
#include <iostream>

#include "checkpoint/inspect_checkpoint.hpp"
#include "cli/command.hpp"
#include "cli/export_model.hpp"
#include "cli/generate.hpp"
#include "core/error.hpp"

namespace strata {
namespace {

class InspectCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* sub =
        app.add_subcommand("inspect", "print a checkpoint's step, layout, deck and tensors, verifying checksums");
    sub->add_option("checkpoint", path_, "checkpoint file (.h5)")->required();
    return sub;
  }
  int run(int rank) override {
    if (rank != 0) return kExitOk;
    return inspect_checkpoint(path_, std::cout) == 0 ? kExitOk : kExitChecksum;
  }

 private:
  std::string path_;
};

class GenerateCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* sub = app.add_subcommand("generate", "sample text from a trained GPT checkpoint");
    sub->add_option("checkpoint", path_, "checkpoint file (.h5)")->required();
    sub->add_option("--prompt", opts_.prompt, "text to continue");
    sub->add_option("--tokens", opts_.tokens, "tokens to sample (default 200)");
    sub->add_option("--temperature", opts_.temperature, "softmax temperature; 0 = greedy (default 1)");
    sub->add_option("--seed", opts_.seed, "sampling seed (default 1)");
    sub->add_option("--tokenizer", opts_.tokenizer,
                    "SentencePiece model to encode the prompt and decode with (default: the one the checkpoint's "
                    "deck names)");
    return sub;
  }
  int run(int rank) override {
    if (rank == 0) std::cout << generate_text(path_, opts_) << std::endl;
    return kExitOk;
  }

 private:
  std::string path_;
  GenerateOptions opts_;
};

class ExportCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* sub = app.add_subcommand(
        "export",
        "write a GPT checkpoint as a Hugging Face GPT-2 folder (config.json, model.safetensors) or an llm.c "
        "model file (docs/interop.md)");
    sub->add_option("checkpoint", path_, "checkpoint file (.h5)")->required();
    sub->add_option("out", opts_.out, "the folder (hf) or file (llmc) to write; must not exist, or be an empty folder")
        ->required();
    sub->add_option("--format", opts_.format, "hf (Hugging Face GPT2LMHeadModel) or llmc (llm.c's gpt2_*.bin)")
        ->required();
    sub->add_option("--dtype", opts_.dtype, "fp32 (default) or bf16 (rounded to nearest even)");
    return sub;
  }
  int run(int rank) override {
    if (rank == 0) std::printf("%s\n", export_model(path_, opts_).c_str());
    return kExitOk;
  }

 private:
  std::string path_;
  ExportOptions opts_;
};

}  // namespace

std::unique_ptr<Command> inspect_command() { return std::make_unique<InspectCommand>(); }
std::unique_ptr<Command> generate_command() { return std::make_unique<GenerateCommand>(); }
std::unique_ptr<Command> export_command() { return std::make_unique<ExportCommand>(); }

}  // namespace strata
