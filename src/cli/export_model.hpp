#pragma once
// `strata export CKPT --format hf|llmc OUT [--dtype fp32|bf16]`: a GPT checkpoint as a
// Hugging Face GPT-2 folder (config.json, model.safetensors, the tokenizer the checkpoint
// carries, a README) or as an llm.c model file. Checkpoints hold global tensors, so any
// layout's checkpoint exports alike; the optimizer state and the sampler position are not
// exported (docs/interop.md).
#include <string>

namespace strata {

struct ExportOptions {
  std::string format;          // "hf" or "llmc"
  std::string out;             // a folder (hf) or a file (llmc)
  std::string dtype = "fp32";  // "fp32" or "bf16" (rounded to nearest even)
};

// Written whole or not at all: into a temporary folder or file beside `out`, fsynced, then
// renamed; an existing non-empty folder or an existing file at `out` is refused. Throws
// UserError for a checkpoint that is not a GPT-2-shaped model or bad options, IoError
// when a write fails (nothing is left at `out`). Returns a one-line summary.
std::string export_model(const std::string& checkpoint, const ExportOptions& opts);

}  // namespace strata
