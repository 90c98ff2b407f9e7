#pragma once
// `strata generate CKPT.h5 --prompt TEXT --tokens N`: sample from a trained GPT.
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct GenerateOptions {
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 1.0;  // 0: always the most likely token
  uint64_t seed = 1;
  std::string tokenizer;  // the SentencePiece model ("": the checkpoint's deck's data.tokenizer)
};

// Builds the model the checkpoint's deck describes, loads its weights and returns the
// prompt followed by the sampled text. A model trained on token shards encodes the prompt
// and decodes its tokens through the tokenizer: opts.tokenizer, else the one the
// checkpoint carries (/tokenizer/model), else (older checkpoints) the one its deck names
// (data.tokenizer or token_dir/tokenizer.model, relative to where the run started);
// byte-level models take the prompt as bytes, and tokens >= 256 (random-token models)
// print as <id>. Throws UserError for a tokenizer that is missing or does not fit the model.
std::string generate_text(const std::string& checkpoint, const GenerateOptions& opts);

}  // namespace strata
