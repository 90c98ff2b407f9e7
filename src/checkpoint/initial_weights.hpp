#pragma once
// model.init_from: a fresh run's parameters read from weights made elsewhere or earlier:
// a Hugging Face GPT-2 (model.safetensors, or the folder holding it and its config.json),
// an llm.c model file (.bin), or a strata checkpoint (its /params; its optimizer state is
// not wanted). The format is told by the file's first bytes, not its name.
#include <string>

#include "core/deck.hpp"
#include "state/param_store.hpp"

namespace strata {

// Each rank reads its own shards (the boxes ParamStore holds: a tensor, pipeline or expert
// split reads only its part, one tensor at a time, so a rank never holds more than its
// shards and one tensor's block). Every tensor's shape is checked against the deck's
// model before any value is read: a mismatch is one UserError naming the file's tensor and
// both shapes, as is a missing tensor, a dtype strata does not read, a bad or truncated
// file. A padded vocabulary (model.padded_vocab_size, llm.c's Vp) reads the file's first
// model.vocab_size rows and starts its padding at zero. Returns what was read, for the log
// and the checkpoints' init_from attribute ("Hugging Face safetensors 'PATH' (F32), ...").
std::string load_initial_weights(const std::string& path, const ModelConfig& model, ParamStore<float>& store);

}  // namespace strata
